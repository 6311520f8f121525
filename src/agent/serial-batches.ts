// One run at a time over items that arrive while a run is in flight: what
// arrives meanwhile goes to the next run together (a set: an item given
// twice before its run goes once). For work whose cost is mostly per run,
// such as starting a process (the conntrack cleanup: a fork of the agent).
export class SerialBatches<T> {
  readonly #run: (batch: readonly T[]) => Promise<void>;
  readonly #pending = new Set<T>();
  #busy = false;
  #closed = false;

  constructor(run: (batch: readonly T[]) => Promise<void>) {
    this.#run = run;
  }

  /** Runs at once when idle, else with the next batch; resolves when this call's run (if it started one) drained. */
  async add(items: readonly T[]): Promise<void> {
    if (this.#closed) return;
    for (const x of items) this.#pending.add(x);
    if (this.#busy) return;
    this.#busy = true;
    try {
      while (this.#pending.size > 0 && !this.#closed) {
        const batch = [...this.#pending];
        this.#pending.clear();
        await this.#run(batch);
      }
    } finally {
      this.#busy = false;
    }
  }

  /** Items not yet taken by a run. */
  get pending(): number {
    return this.#pending.size;
  }

  /** No run starts after this; pending items are dropped. */
  close(): void {
    this.#closed = true;
    this.#pending.clear();
  }
}
