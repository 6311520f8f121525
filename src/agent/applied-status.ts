// Applied status, fed by the reconciler's outcome records: what the kernel
// holds (the snapshot of the last successful run), the last attempt's result
// and whether the kernel still matches, handed to the StatusWriter (which
// writes only on change, coalesced), plus the Lease heartbeat. Nothing here
// waits on the API server: enforcement never depends on these writes.
import { createHash } from 'node:crypto';
import { rulesetPieces } from '../nft/render.ts';
import type { CompiledRuleset } from '../ruleset/ir.ts';
import type { Logger } from 'pino';
import type { LeaseApi, StatusApi } from '../kube/status-client.ts';
import type { AppliedRuleset, StatusInput } from '../status/build.ts';
import type { ApplyResultText } from '../status/types.ts';
import { Heartbeat } from './heartbeat.ts';
import type { Outcome } from './outcome.ts';
import { StatusWriter } from './status-writer.ts';

type AppliedScript = { readonly text: string; readonly compiled?: CompiledRuleset };

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
   * The ruleset in force; its full script is hashed once per ruleset (the
   * hash is kept, the ~2 MB text is not): in slices between other work
   * when the compiled form is there, else rendered when a write is due.
   */
  readonly appliedRuleset: () => AppliedScript | undefined;
  readonly onWrite?: (object: 'status' | 'lease', ok: boolean) => void;
  /** An apply runs or waits (the reconciler's busy()): the hash's slices wait for it. */
  readonly busy?: () => boolean;
}

const SLICE_MS = 4;
/** While an apply runs or waits, the hash waits this long between looks, ... */
const BUSY_POLL_MS = 10;
/** ... and this long at most in all: under a steady stream of changes the status still gets its hash. */
const BUSY_WAIT_MAX_MS = 5_000;

export interface HashPacing {
  /** An apply runs or waits: hold the next slice back (its nft answer would wait behind it). */
  readonly busy?: () => boolean;
  /** The most the whole hash waits for `busy` (default 5 s); then it goes on between applies. */
  readonly maxWaitMs?: number;
}

/**
 * `sha256:` of the script of `c` (renderRuleset), rendered and hashed piece
 * by piece, yielding to the event loop after every `sliceMs` of work and
 * waiting while `busy()`; undefined when `wanted()` turns false at a pause.
 */
export async function hashInSlices(
  c: CompiledRuleset,
  sliceMs: number,
  wanted: () => boolean,
  pacing: HashPacing = {},
): Promise<string | undefined> {
  const busy = pacing.busy ?? (() => false);
  const waitUntil = performance.now() + (pacing.maxWaitMs ?? BUSY_WAIT_MAX_MS);
  // A slice that runs while an apply's nft answer arrives delays that apply
  // by the slice (the largest object alone renders in ~8 ms at 100k pods):
  // the agent benchmark's slow remote-peer samples came every 5-10 s, with
  // the status writes (issue 24).
  const idle = async (): Promise<void> => {
    while (busy() && performance.now() < waitUntil) await new Promise((resolve) => setTimeout(resolve, BUSY_POLL_MS));
  };
  await idle();
  const h = createHash('sha256');
  let t0 = performance.now();
  for (const piece of rulesetPieces(c)) {
    h.update(piece);
    if (performance.now() - t0 < sliceMs) continue;
    await new Promise((resolve) => setImmediate(resolve));
    await idle();
    if (!wanted()) return undefined;
    t0 = performance.now();
  }
  return `sha256:${h.digest('hex')}`;
}

export class AppliedStatus {
  readonly #o: AppliedStatusOptions;
  readonly writer: StatusWriter | undefined;
  readonly heartbeat: Heartbeat | undefined;
  /** The last successful apply: its record and the ruleset it put in force. */
  #applied:
    | { readonly seq: number; readonly record: Omit<AppliedRuleset, 'hash'>; readonly ruleset: AppliedScript | undefined }
    | undefined;
  #appliedSeq = 0;
  /** The last apply hashed before a write (what the status reports), by its number (holding no ruleset). */
  #reported: { readonly seq: number; readonly applied: AppliedRuleset } | undefined;
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
            prepare: () => this.#prepare(),
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
        this.#applied = {
          seq: ++this.#appliedSeq,
          record: { state: o.enforced.state, localPods: o.enforced.localPods, stats: o.stats, atUnixMs: o.atUnixMs },
          ruleset: this.#o.appliedRuleset(),
        };
    }
    this.writer?.update(this.#input);
  };

  /**
   * Before each write (at most one per status interval): the hash of the
   * last applied script, rendered and hashed a few ms at a time with the
   * event loop free in between (in one piece it held the loop ~20-40 ms at
   * 100k pods, and a change arriving then waited). The status then reports
   * that apply, even if a newer one lands meanwhile (the next write has it),
   * so record and hash always belong together.
   */
  async #prepare(): Promise<void> {
    const a = this.#applied;
    if (a === undefined || this.#reported?.seq === a.seq) return;
    const hash = await this.#hashOf(a.ruleset);
    if (hash !== undefined) this.#reported = { seq: a.seq, applied: { ...a.record, hash } };
  }

  async #hashOf(r: AppliedScript | undefined): Promise<string | undefined> {
    if (r === undefined) return undefined;
    if (this.#hashed?.of.deref() === r) return this.#hashed.hash;
    const hash =
      r.compiled === undefined
        ? `sha256:${createHash('sha256').update(r.text).digest('hex')}`
        : await hashInSlices(r.compiled, SLICE_MS, () => true, this.#o.busy === undefined ? {} : { busy: this.#o.busy });
    if (hash !== undefined) this.#hashed = { of: new WeakRef(r), hash };
    return hash;
  }

  readonly #input = (): StatusInput => ({
    node: this.#o.node,
    applied: this.#reported?.applied,
    last: this.#last,
    inSync: this.#inSync,
    agentVersion: this.#o.agentVersion,
    nftVersion: this.#o.nftVersion(),
  });
}
