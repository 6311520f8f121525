// Probing the simulated cluster with real packets: one probe is a connection
// attempt from a pod, a node or the outside host to a pod (through its Service
// ClusterIP or its own address), a node or the outside host. All probes of a
// batch run in parallel with short timeouts; probes whose result differs from
// the expectation are tried again with a longer timeout, as upstream polls
// (a blocked connection stays blocked however long one waits, a slow one
// succeeds), so a loaded machine cannot turn "allowed" into a false "blocked".
import type { Family, Protocol } from '../../src/model/types.ts';
import { observeTable } from '../support/truth-table.ts';
import type { TruthTable } from '../support/truth-table.ts';
import type { Agent, AgentProbe } from './agent-client.ts';
import type { Cluster } from './cluster.ts';

/** A pod key (`ns/name`), `node:<name>` or `outside`. */
export type EndpointKey = string;

export const OUTSIDE_KEY = 'outside';
export function nodeKey(name: string): EndpointKey {
  return `node:${name}`;
}

export interface Probe {
  readonly from: EndpointKey;
  readonly to: EndpointKey;
  readonly protocol: Protocol;
  /** The port dialled: a Service port with via 'service', else the destination's own port. */
  readonly port: number;
  readonly family: Family;
  /** How a pod destination is addressed; ignored for nodes and the outside host. Default 'service'. */
  readonly via?: 'service' | 'pod';
}

export interface ResolvedProbe {
  readonly probe: Probe;
  readonly agent: Agent;
  readonly sourceIP: string;
  readonly localAddress: string | undefined;
  /** What the source dials. */
  readonly host: string;
  /** The destination as policy sees it: after DNAT. */
  readonly targetIP: string;
  readonly targetPort: number;
  /** The agent that counts SCTP at the destination. */
  readonly receiver: Agent | undefined;
}

export interface ProbeOutcome extends ResolvedProbe {
  readonly connected: boolean;
  /** connected | timeout | ECONNREFUSED | not seen | ... */
  readonly detail: string;
  readonly attempts: number;
}

export interface ProbeOptions {
  /** First attempt's timeout (ms). Default 400. */
  readonly timeoutMs?: number;
  /** The expected result; mismatching probes are retried. */
  readonly expect?: (p: ResolvedProbe) => boolean | undefined;
  /** Extra attempts for mismatching probes. Default 2. */
  readonly retries?: number;
  /** Timeout of the extra attempts (ms). Default 2000. */
  readonly retryTimeoutMs?: number;
}

function ipOf(ips: { v4: string; v6: string }, f: Family): string {
  return f === 4 ? ips.v4 : ips.v6;
}

export function resolveProbe(c: Cluster, probe: Probe): ResolvedProbe {
  const f = probe.family;
  let agent: Agent | undefined;
  let sourceIP: string;
  let localAddress: string | undefined;
  if (probe.from === OUTSIDE_KEY) {
    agent = c.outside.agent;
    sourceIP = ipOf(c.outside.ips, f);
  } else if (probe.from.startsWith('node:')) {
    const n = c.node(probe.from.slice(5));
    agent = n.agent;
    // The node's own address, as kubelet's probes use it.
    sourceIP = localAddress = ipOf(n.addresses, f);
  } else {
    const p = c.pod(probe.from);
    agent = p.agent;
    sourceIP = ipOf(p.ips, f);
  }
  if (agent === undefined) throw new Error(`probe from ${probe.from}: no agent there (nodeAgents: false?)`);

  let host: string;
  let targetIP: string;
  let targetPort = probe.port;
  let receiver: Agent | undefined;
  if (probe.to === OUTSIDE_KEY) {
    host = targetIP = ipOf(c.outside.ips, f);
    receiver = c.outside.agent;
  } else if (probe.to.startsWith('node:')) {
    const n = c.node(probe.to.slice(5));
    host = targetIP = ipOf(n.addresses, f);
    receiver = undefined;
  } else {
    const p = c.pod(probe.to);
    targetIP = ipOf(p.ips, f);
    receiver = p.agent;
    if ((probe.via ?? 'service') === 'service') {
      const sp = p.services.find((s) => s.protocol === probe.protocol && s.port === probe.port);
      if (sp === undefined)
        throw new Error(`probe ${describeProbe(probe)}: the Service of ${p.key} has no ${probe.protocol} port ${probe.port}`);
      host = ipOf(p.clusterIPs, f);
      targetPort = sp.targetPort;
    } else {
      host = targetIP;
    }
  }
  return { probe, agent, sourceIP, localAddress, host, targetIP, targetPort, receiver };
}

export function describeProbe(p: Probe): string {
  const via = p.to.includes('/') ? ` via ${p.via ?? 'service'}` : '';
  return `${p.from} -> ${p.to} ${p.protocol}/${p.port} IPv${p.family}${via}`;
}

export function describeOutcome(o: ProbeOutcome): string {
  const dnat = o.host === o.targetIP && o.probe.port === o.targetPort ? '' : ` (dialled ${o.host} port ${o.probe.port})`;
  return `${describeProbe(o.probe)}: ${o.sourceIP} -> ${o.targetIP} port ${o.targetPort}${dnat}: ${o.connected ? 'connected' : `blocked (${o.detail})`}${o.attempts > 1 ? ` after ${o.attempts} attempts` : ''}`;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** One attempt at a batch: TCP and UDP per source agent in parallel, SCTP sent then read at the receivers. */
async function attempt(
  c: Cluster,
  batch: readonly ResolvedProbe[],
  timeoutMs: number,
): Promise<{ connected: boolean; detail: string }[]> {
  const out: { connected: boolean; detail: string }[] = batch.map(() => ({ connected: false, detail: 'not run' }));
  const bySource = new Map<Agent, number[]>();
  const sctp: { i: number; sport: number }[] = [];
  batch.forEach((r, i) => {
    if (r.probe.protocol === 'SCTP') {
      if (r.receiver === undefined)
        throw new Error(`probe ${describeProbe(r.probe)}: SCTP is only counted at pods and the outside host`);
      sctp.push({ i, sport: c.nextSctpPort() });
    }
    const list = bySource.get(r.agent) ?? [];
    list.push(i);
    bySource.set(r.agent, list);
  });
  const sportOf = new Map(sctp.map((s) => [s.i, s.sport]));
  await Promise.all(
    [...bySource].map(async ([agent, idx]) => {
      const reqs: AgentProbe[] = idx.map((i) => {
        const r = batch[i]!;
        const sport = sportOf.get(i);
        return {
          proto: r.probe.protocol,
          host: r.host,
          port: r.probe.port,
          timeoutMs,
          ...(r.localAddress === undefined ? {} : { localAddress: r.localAddress }),
          ...(sport === undefined ? {} : { sport }),
        };
      });
      const res = await agent.probe(reqs);
      idx.forEach((i, k) => {
        const x = res[k]!;
        out[i] = { connected: x.ok, detail: x.detail };
      });
    }),
  );
  if (sctp.length > 0) {
    // The INITs are on their way (veth delivery is immediate, but give a loaded machine some slack).
    await sleep(Math.min(timeoutMs, 1000));
    const receivers = [...new Set(sctp.map((s) => batch[s.i]!.receiver!))];
    const seen = new Map<Agent, Set<string>>();
    await Promise.all(receivers.map(async (a) => seen.set(a, new Set((await a.sctpSeen()).map((e) => `${e.sport}/${e.dport}`)))));
    for (const { i, sport } of sctp) {
      const r = batch[i]!;
      const sent = out[i]!;
      if (sent.detail !== 'sent') continue; // the raw send itself failed: keep its error
      const got = seen.get(r.receiver!)?.has(`${sport}/${r.targetPort}`) ?? false;
      out[i] = { connected: got, detail: got ? 'INIT received' : 'INIT not received' };
    }
  }
  return out;
}

const locks = new WeakMap<Cluster, Promise<unknown>>();

/** Batches on one cluster run one at a time (SCTP records are read and cleared per batch). */
function exclusive<T>(c: Cluster, f: () => Promise<T>): Promise<T> {
  const prev = locks.get(c) ?? Promise.resolve();
  const next = prev.then(f, f);
  locks.set(
    c,
    next.catch(() => {}),
  );
  return next;
}

export function runProbes(c: Cluster, probes: readonly Probe[], opts: ProbeOptions = {}): Promise<ProbeOutcome[]> {
  return exclusive(c, async () => {
    const resolved = probes.map((p) => resolveProbe(c, p));
    const first = await attempt(c, resolved, opts.timeoutMs ?? 400);
    const outcomes: ProbeOutcome[] = resolved.map((r, i) => ({ ...r, ...first[i]!, attempts: 1 }));
    const expect = opts.expect;
    if (expect === undefined) return outcomes;
    for (let round = 0; round < (opts.retries ?? 2); round++) {
      const again = outcomes.flatMap((o, i) => {
        const e = expect(o);
        return e !== undefined && e !== o.connected ? [i] : [];
      });
      if (again.length === 0) break;
      const res = await attempt(
        c,
        again.map((i) => resolved[i]!),
        opts.retryTimeoutMs ?? 2000,
      );
      again.forEach((i, k) => {
        outcomes[i] = { ...outcomes[i]!, ...res[k]!, attempts: outcomes[i]!.attempts + 1 };
      });
    }
    return outcomes;
  });
}

export interface MatrixOptions extends Omit<ProbeOptions, 'expect'> {
  readonly protocol: Protocol;
  readonly port: number;
  readonly family?: Family;
  readonly via?: 'service' | 'pod';
  /** Default: every pod of the cluster. */
  readonly froms?: readonly EndpointKey[];
  readonly tos?: readonly EndpointKey[];
  /** Used to retry mismatching cells (see runProbes). */
  readonly expected?: TruthTable;
}

export interface MatrixResult {
  readonly observed: TruthTable;
  readonly outcomes: readonly ProbeOutcome[];
}

/** Probes every ordered pair (self-probes are left unknown, as upstream ignores loopback). */
export async function probeMatrix(c: Cluster, opts: MatrixOptions): Promise<MatrixResult> {
  const froms = opts.froms ?? c.pods.map((p) => p.key);
  const tos = opts.tos ?? c.pods.map((p) => p.key);
  const probes: Probe[] = [];
  for (const from of froms) {
    for (const to of tos) {
      if (from === to) continue;
      probes.push({ from, to, protocol: opts.protocol, port: opts.port, family: opts.family ?? 4, via: opts.via ?? 'service' });
    }
  }
  const expected = opts.expected;
  const outcomes = await runProbes(c, probes, {
    ...opts,
    ...(expected === undefined ? {} : { expect: (r: ResolvedProbe) => expected.values[r.probe.from]?.[r.probe.to] }),
  });
  const got = new Map(outcomes.map((o) => [`${o.probe.from}\0${o.probe.to}`, o.connected]));
  const axes = [...new Set([...froms, ...tos])];
  const table = observeTable(axes, (f, t) => got.get(`${f}\0${t}`));
  // observeTable takes one axis list; keep the caller's axes.
  return { observed: { froms: [...froms], tos: [...tos], values: table.values }, outcomes };
}
