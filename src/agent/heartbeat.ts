// The agent's heartbeat: a coordination.k8s.io Lease named after the node in
// the agent namespace, renewed every interval (default 30 s), like the
// kubelet's node lease. Separate from the status object, so liveness costs
// one small write per interval and the status is written only on change.
// Renewals are PUTs with the Lease's resourceVersion; a conflict (someone
// else wrote it) reads it again and retries once.
import type { Logger } from 'pino';
import type { LeaseApi } from '../kube/status-client.ts';
import { errorMessage } from '../observability/errors.ts';
import type { LeaseObject } from '../status/types.ts';
import { SYSTEM_CLOCK, type Clock } from './ports.ts';

export interface HeartbeatOptions {
  readonly namespace: string;
  readonly node: string;
  readonly intervalMs: number;
  /** leaseDurationSeconds: after this without a renewal the agent counts as dead (default 3 intervals). */
  readonly durationSeconds?: number;
  readonly holder?: string;
  readonly clock?: Clock;
  /** Each renewal's result (metrics). */
  readonly onResult?: (ok: boolean) => void;
}

export class Heartbeat {
  readonly #api: LeaseApi;
  readonly #log: Logger;
  readonly #o: HeartbeatOptions & { readonly durationSeconds: number; readonly holder: string };
  readonly #clock: Clock;
  #lease: LeaseObject | undefined;
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<void> | undefined;
  #failures = 0;
  renewals = 0;
  /** Renewals that failed (since start). */
  failures = 0;

  constructor(api: LeaseApi, log: Logger, opts: HeartbeatOptions) {
    this.#api = api;
    this.#log = log;
    this.#clock = opts.clock ?? SYSTEM_CLOCK;
    this.#o = {
      ...opts,
      durationSeconds: opts.durationSeconds ?? Math.max(1, Math.ceil((3 * opts.intervalMs) / 1000)),
      holder: opts.holder ?? `nft-netpol-agent/${opts.node}`,
    };
  }

  start(): void {
    if (this.#timer !== undefined) return;
    this.#tick();
    this.#timer = setInterval(() => this.#tick(), this.#o.intervalMs);
    this.#timer.unref();
  }

  async stop(): Promise<void> {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
    await this.#running;
  }

  #tick(): void {
    if (this.#running !== undefined) return;
    this.#running = this.renew()
      .then(
        () => {
          this.#o.onResult?.(true);
          if (this.#failures > 0) this.#log.info({ event: 'heartbeat', after: this.#failures }, 'lease renewed again');
          this.#failures = 0;
        },
        (e: unknown) => {
          this.#failures++;
          this.failures++;
          this.#lease = undefined;
          this.#o.onResult?.(false);
          if (this.#failures <= 3 || this.#failures % 10 === 0)
            this.#log.warn(
              { event: 'heartbeat', error: errorMessage(e), failures: this.#failures },
              'could not renew the agent lease; enforcement is unaffected',
            );
        },
      )
      .finally(() => {
        this.#running = undefined;
      });
  }

  /** One renewal (creates the Lease when missing). */
  async renew(): Promise<void> {
    const now = new Date(this.#clock.wall()).toISOString();
    const ns = this.#o.namespace;
    for (let attempt = 0; attempt < 2; attempt++) {
      const cur = this.#lease ?? (await this.#api.readLease(ns, this.#o.node));
      if (cur === undefined) {
        const created = await this.#api.createLease(ns, {
          metadata: { name: this.#o.node, namespace: ns },
          spec: {
            holderIdentity: this.#o.holder,
            leaseDurationSeconds: this.#o.durationSeconds,
            acquireTime: now,
            renewTime: now,
          },
        });
        if (created) {
          this.renewals++;
          return;
        }
        continue; // created by someone meanwhile: read it and renew
      }
      const next: LeaseObject = {
        metadata: cur.metadata,
        spec: {
          ...cur.spec,
          holderIdentity: this.#o.holder,
          leaseDurationSeconds: this.#o.durationSeconds,
          ...(cur.spec?.holderIdentity === this.#o.holder ? {} : { acquireTime: now }),
          renewTime: now,
        },
      };
      const r = await this.#api.replaceLease(ns, next);
      if (r === 'conflict' || r === 'gone') {
        this.#lease = undefined;
        continue;
      }
      this.#lease = r;
      this.renewals++;
      return;
    }
    throw new Error(`lease ${ns}/${this.#o.node} kept changing under the renewal`);
  }
}
