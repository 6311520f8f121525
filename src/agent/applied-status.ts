// Applied status, fed by the reconciler's outcome records: what the kernel
// holds (the snapshot of the last successful run), the last attempt's result
// and whether the kernel still matches, handed to the StatusWriter (which
// writes only on change, coalesced), plus the Lease heartbeat. Nothing here
// waits on the API server: enforcement never depends on these writes.
import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import type { LeaseApi, StatusApi } from '../kube/status-client.ts';
import type { AppliedRuleset, StatusInput } from '../status/build.ts';
import type { ApplyResultText } from '../status/types.ts';
import { Heartbeat } from './heartbeat.ts';
import type { Outcome } from './outcome.ts';
import { StatusWriter } from './status-writer.ts';

export interface AppliedStatusOptions {
  readonly node: string;
  readonly agentNamespace: string;
  /** 0 disables the status object. */
  readonly statusIntervalMs: number;
  /** 0 disables the Lease. */
  readonly heartbeatIntervalMs: number;
  readonly agentVersion: string;
  /** The nft version (known after the agent's preflight). */
  readonly nftVersion: () => string | undefined;
  /**
   * The ruleset in force; its full script is rendered and hashed only when a
   * write is due, once per ruleset (the hash is kept, the ~2 MB text is not).
   */
  readonly appliedRuleset: () => { readonly text: string } | undefined;
  readonly onWrite?: (object: 'status' | 'lease', ok: boolean) => void;
}

export class AppliedStatus {
  readonly #o: AppliedStatusOptions;
  readonly writer: StatusWriter | undefined;
  readonly heartbeat: Heartbeat | undefined;
  #applied: Omit<AppliedRuleset, 'hash'> | undefined;
  #last: StatusInput['last'];
  #inSync = false;
  /** The hash of the script of `of` (held weakly: a replaced ruleset goes). */
  #hashed: { of: WeakRef<object>; hash: string } | undefined;

  constructor(api: StatusApi & LeaseApi, log: Logger, opts: AppliedStatusOptions) {
    this.#o = opts;
    const onWrite = opts.onWrite;
    this.writer =
      opts.statusIntervalMs > 0
        ? new StatusWriter(api, log.child({ component: 'status' }), {
            node: opts.node,
            intervalMs: opts.statusIntervalMs,
            ...(onWrite === undefined ? {} : { onResult: (ok: boolean) => onWrite('status', ok) }),
          })
        : undefined;
    this.heartbeat =
      opts.heartbeatIntervalMs > 0
        ? new Heartbeat(api, log.child({ component: 'heartbeat' }), {
            namespace: opts.agentNamespace,
            node: opts.node,
            intervalMs: opts.heartbeatIntervalMs,
            ...(onWrite === undefined ? {} : { onResult: (ok: boolean) => onWrite('lease', ok) }),
          })
        : undefined;
  }

  start(): void {
    this.heartbeat?.start();
  }

  async stop(): Promise<void> {
    await Promise.all([this.writer?.stop(), this.heartbeat?.stop()]);
  }

  /** The reconciler's listener (onOutcome). */
  readonly onOutcome = (o: Outcome): void => {
    if (o.kind === 'check') {
      // A table changed from outside is not what was applied; a match confirms it again.
      if (o.result === 'drifted') this.#inSync = false;
      else if (o.result === 'match' && this.#last?.result === 'Applied') this.#inSync = true;
      else return;
    } else {
      const result: ApplyResultText = o.result === 'failed' ? 'Failed' : 'Applied';
      this.#last = { result, atUnixMs: o.atUnixMs, error: o.error };
      this.#inSync = result === 'Applied';
      // Times of versions already reported stay (the builder keeps them); new ones get this run's.
      if (o.enforced !== undefined && o.stats !== undefined)
        this.#applied = { state: o.enforced.state, localPods: o.enforced.localPods, stats: o.stats, atUnixMs: o.atUnixMs };
    }
    this.writer?.update(this.#input);
  };

  readonly #input = (): StatusInput => {
    const a = this.#applied;
    const hash = a === undefined ? undefined : this.#hash();
    return {
      node: this.#o.node,
      applied: a === undefined || hash === undefined ? undefined : { ...a, hash },
      last: this.#last,
      inSync: this.#inSync,
      agentVersion: this.#o.agentVersion,
      nftVersion: this.#o.nftVersion(),
    };
  };

  #hash(): string | undefined {
    const applied = this.#o.appliedRuleset();
    if (applied === undefined) return undefined;
    if (this.#hashed?.of.deref() !== applied)
      this.#hashed = { of: new WeakRef(applied), hash: `sha256:${createHash('sha256').update(applied.text).digest('hex')}` };
    return this.#hashed.hash;
  }
}
