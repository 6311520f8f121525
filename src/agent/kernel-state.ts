// What the kernel holds, as far as the agent knows: the ruleset it applied
// last, the kernel's own listing of it captured right after (the canonical
// listing drift checks compare with), when the kernel was last seen to match,
// how many increments went in since the last full apply, and the read-back in
// flight (cancelled when newer work makes it moot).
import type { Logger } from 'pino';
import { setTimeout as sleep } from 'node:timers/promises';
import { errorMessage } from '../observability/errors.ts';
import { PackedListing, checkDrift, compiledObjects, normalizeListing, sameObjects, tableObjects } from './drift.ts';
import type { Clock, Dataplane, Rendered } from './ports.ts';
import { heldCount, isLingering, NO_HELD_PEERS, NO_LINGERING, type HeldPeers, type Lingering } from '../nft/recent-peers.ts';

export type KernelCheck =
  | { readonly kind: 'match' }
  | { readonly kind: 'drifted'; readonly detail: string }
  | { readonly kind: 'unknown'; readonly detail: string };

/** Listings faster than this are read back at once (1k pods: ~40 ms; 100k: 0.4-0.8 s). */
export const SETTLE_ABOVE_MS = 250;

export const NO_READBACK = 'no listing was captured after the last apply';

/** A check's listing given up for a change that came meanwhile (its signal aborted). */
export const GAVE_WAY = 'gave way to a change';

interface Applied {
  /** What was applied; its text is rendered lazily (only a full apply or the debug endpoint needs it). */
  readonly rendered: Rendered;
  /** Normalized kernel listing right after the apply (packed); undefined if it could not be read. */
  readonly canonical: PackedListing | undefined;
}

export type ReadBack =
  | { readonly kind: 'captured' }
  | { readonly kind: 'changed' }
  | { readonly kind: 'missing' }
  | { readonly kind: 'cancelled' }
  | { readonly kind: 'failed' };

export class KernelState {
  readonly #dataplane: Dataplane;
  readonly #clock: Clock;
  readonly #log: Logger;

  #applied: Applied | undefined;
  /** Monotonic time the kernel was last seen to match the last apply. */
  #verifiedAt: number | undefined;
  #incrementsSinceFull = 0;
  /** Monotonic time of the last full apply. */
  #fullAt: number | undefined;
  /** How long the last listing took (ms): a dear one waits for a quiet moment (readBack). */
  #lastListMs = 0;
  #readBack: AbortController | undefined;
  /** The last apply's read-back was only put off by newer work (not failed, not changed). */
  #deferred = false;
  /** The script of the last failed transaction, until one succeeds (debug endpoint). */
  #failedText: string | undefined;
  /** Remote addresses the kernel holds out of the applied pod peer maps, and what lingers (nft/recent-peers.ts). */
  #held: HeldPeers = NO_HELD_PEERS;
  #lingering: Lingering = NO_LINGERING;

  constructor(dataplane: Dataplane, clock: Clock, log: Logger) {
    this.#dataplane = dataplane;
    this.#clock = clock;
    this.#log = log;
  }

  /** The ruleset applied last (undefined before the first apply). */
  get applied(): Rendered | undefined {
    return this.#applied?.rendered;
  }

  get incrementsSinceFull(): number {
    return this.#incrementsSinceFull;
  }

  /** Monotonic time of the last full apply (undefined before the first). */
  get fullAppliedAt(): number | undefined {
    return this.#fullAt;
  }

  lastFailedText(): string | undefined {
    return this.#failedText;
  }

  /** The kernel was seen to match the last apply within `freshMs`. */
  verifiedWithin(freshMs: number): boolean {
    return (
      this.#applied?.canonical !== undefined && this.#verifiedAt !== undefined && this.#clock.mono() - this.#verifiedAt < freshMs
    );
  }

  /** Something changed the table: the next unchanged render lists it instead of trusting the last match. */
  distrust(): void {
    this.#verifiedAt = undefined;
    this.#deferred = false;
  }

  /**
   * The last transaction went in (nft said so) and its read-back was only put
   * off by newer changes: no listing says otherwise, and nothing foreign was
   * reported since (the table monitor's report calls distrust()).
   */
  get readBackDeferred(): boolean {
    return this.#deferred && this.#applied !== undefined && this.#applied.canonical === undefined;
  }

  /** What the kernel holds out of the applied pod peer maps (a full apply holds nothing out). */
  get held(): HeldPeers {
    return this.#held;
  }

  /** What the kernel keeps of dropped identities and dispatch rules (a full apply keeps nothing). */
  get lingering(): Lingering {
    return this.#lingering;
  }

  /** Held addresses or lingering objects: the kernel is not yet the applied ruleset exactly. */
  get unfolded(): boolean {
    return heldCount(this.#held) > 0 || isLingering(this.#lingering);
  }

  /**
   * A transaction went in: the kernel now holds `rendered` (its listing is
   * captured by readBack()), with `held` out of its pod peer maps and `lingering` kept.
   */
  recordApplied(
    rendered: Rendered,
    mode: 'full' | 'incremental',
    held: HeldPeers = NO_HELD_PEERS,
    lingering: Lingering = NO_LINGERING,
  ): void {
    this.#applied = { rendered, canonical: undefined };
    this.#held = mode === 'full' ? NO_HELD_PEERS : held;
    this.#lingering = mode === 'full' ? NO_LINGERING : lingering;
    this.#deferred = false;
    this.#incrementsSinceFull = mode === 'incremental' ? this.#incrementsSinceFull + 1 : 0;
    if (mode === 'full') this.#fullAt = this.#clock.mono();
    this.#failedText = undefined;
  }

  /** nft rejected this script; the previous ruleset stays in force. */
  recordRejected(rendered: Rendered): void {
    this.#failedText = rendered.text;
  }

  /** An apply succeeded without a transaction (nothing to change). */
  recordUnchanged(): void {
    this.#failedText = undefined;
  }

  /** How long a read-back waits before listing: nothing for a cheap listing, twice the last one's time (at most 2 s) for a dear one. */
  get settleMs(): number {
    return this.#lastListMs < SETTLE_ABOVE_MS ? 0 : Math.min(2_000, 2 * this.#lastListMs);
  }

  /** Newer work is waiting: the read-back in flight is moot. */
  cancelReadBack(): void {
    this.#readBack?.abort();
  }

  /**
   * Lists the table right after an apply and keeps it as the canonical
   * listing, unless its objects are not the ones just applied (someone changed
   * the table in between) or a newer change cancelled it. `moot`: newer
   * changes already wait (they came while the apply was still running, when
   * there was no read-back to cancel yet): skipped, their apply reads back.
   */
  async readBack(moot: () => boolean = () => false): Promise<ReadBack> {
    const applied = this.#applied;
    const r = await this.#readBackOnce(moot);
    if (r.kind === 'cancelled' && applied !== undefined && this.#applied === applied) this.#deferred = true;
    return r;
  }

  async #readBackOnce(moot: () => boolean): Promise<ReadBack> {
    const applied = this.#applied;
    if (applied === undefined) return { kind: 'failed' };
    if (moot()) return { kind: 'cancelled' };
    const ac = new AbortController();
    this.#readBack = ac;
    let listing: string | undefined;
    try {
      // A listing that costs more than a change's apply (100k pods: ~0.8 s
      // of nft and parsing) waits for a quiet moment: under a stream of
      // changes each one cancels it, instead of competing with their applies
      // for the CPU. The table monitor still reports foreign changes meanwhile.
      const settle = this.settleMs;
      if (settle > 0) await sleep(settle, undefined, { signal: ac.signal });
      const t = this.#clock.mono();
      listing = await this.#dataplane.list(ac.signal);
      this.#lastListMs = this.#clock.mono() - t;
    } catch (e) {
      if (ac.signal.aborted) return { kind: 'cancelled' };
      this.#log.warn({ err: e }, 'listing the table failed');
      return { kind: 'failed' };
    } finally {
      if (this.#readBack === ac) this.#readBack = undefined;
    }
    if (ac.signal.aborted) return { kind: 'cancelled' };
    if (listing === undefined) return { kind: 'missing' };
    if (!sameObjects(objectsOf(applied.rendered), listing)) return { kind: 'changed' };
    const canonical = await PackedListing.of(normalizeListing(listing));
    if (this.#applied !== applied) return { kind: 'cancelled' };
    this.#applied = { rendered: applied.rendered, canonical };
    this.#verifiedAt = this.#clock.mono();
    return { kind: 'captured' };
  }

  /**
   * Lists the table and compares it with the last apply. Without a canonical
   * listing only a missing table can be told; otherwise the answer is unknown.
   * An aborted `signal` gives up the listing (and the comparison): unknown, GAVE_WAY.
   */
  async check(signal?: AbortSignal): Promise<KernelCheck> {
    const applied = this.#applied;
    if (applied === undefined) return { kind: 'unknown', detail: 'nothing applied yet' };
    let listing;
    try {
      listing = await this.#dataplane.list(signal);
    } catch (e) {
      if (signal?.aborted === true) return { kind: 'unknown', detail: GAVE_WAY };
      return { kind: 'unknown', detail: `listing the table failed: ${errorMessage(e)}` };
    }
    // The comparison is a walk of the whole listing too (100k pods: ~2 MB).
    if (signal?.aborted === true) return { kind: 'unknown', detail: GAVE_WAY };
    if (applied.canonical === undefined) {
      if (listing === undefined) return { kind: 'drifted', detail: 'table missing' };
      return { kind: 'unknown', detail: NO_READBACK };
    }
    const c = checkDrift(applied.canonical.text(), listing);
    if (!c.drifted) {
      this.#verifiedAt = this.#clock.mono();
      return { kind: 'match' };
    }
    return { kind: 'drifted', detail: c.firstDifference === undefined ? c.why : `${c.why}: ${c.firstDifference}` };
  }
}

function objectsOf(r: Rendered): string[] {
  return r.compiled !== undefined ? compiledObjects(r.compiled) : tableObjects(r.text);
}
