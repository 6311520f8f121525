// Benchmark: the per-packet cost of the node's ruleset, with real packets.
// A node namespace routes between a client pod and a server pod (the
// harness's routed style: every packet crosses the node's forward hook). For
// 1, 10, 100 and 1000 policies selecting the server (the one allowing the
// client sorts last), and the same with the client isolated for egress by as
// many policies (again the allowing one last), it measures
//   allowed  new TCP connections per second, client -> server:8080
//            (connect, then RST: SYN, SYN-ACK, ACK, RST; only the SYN is `new`)
//   denied   SYNs per second to server:9090, which nothing allows, that the
//            node drops (raw SYNs, each a new conntrack entry)
// each against the same traffic through a forward hook holding only
// `ct state established,related accept` (for denied: plus one rule dropping
// port 9090, the cheapest possible drop), and prints ratios, which compare
// across machines. Many short runs alternate ruleset and baseline (A B B A:
// which goes first alternates too) so that load from elsewhere hits both
// alike; a ratio is the median over those pairs, printed with the pairs'
// quartiles (its spread). A first row measures the baseline against itself:
// the noise of the method, which must come out ~1.00.
// Throughput ratios on a shared VM move by several percent between identical
// runs, so with perf available each run is also profiled (cpu-clock, whole
// machine): the CPU ratio (baseline CPU per unit over the ruleset's, which
// leaves out time the VM lost) and the nftables evaluation time per unit the
// ruleset adds, the steadiest figure (within +-110 ns for SYNs between identical rulesets),
// and the "nft ratio" it implies: B / (B + nft +ns), B the least disturbed
// cost of a unit in the baseline runs (the least of the machine CPU per unit
// and of the CPUs the path keeps busy over its rate: on a shared machine the
// whole-machine CPU counts other jobs too): the throughput ratio a CPU-bound
// node would see if nothing but the ruleset differed;
// --verbose also prints, per path, the functions whose time per unit differs
// most from the baseline's (how the FPU cost of pipapo lookups was found,
// docs/datapath.md). Prints figures,
// asserts nothing. Root, ip, nft, conntrack, taskset and python3 are needed;
// perf is optional (--no-perf skips it).
//
//   node scripts/bench-datapath.ts                       everything (a few minutes)
//   node scripts/bench-datapath.ts --policies 1,1000 --runs 5 --conns 20000
//   node scripts/bench-datapath.ts --updates             also bench-update.ts at 100k pods
//   node scripts/bench-datapath.ts --cnp                 1000 policies plus 100 ClusterNetworkPolicies of 25 rules
//                                                        (50 selecting the server): the client accepted by an Admin
//                                                        rule, or passed to the NetworkPolicy tier; denied by one
//   node scripts/bench-datapath.ts --cnp --cnp-path pass   only the passed (or accepted) rows
//   node scripts/bench-datapath.ts --staged              1 policy enforced plus 100 (--policies) staged ones selecting
//                                                        the same pods (compile/staged.ts: the shadow path judges
//                                                        every new connection; nothing changes verdict)
//   node scripts/bench-datapath.ts --no-egress | --egress-only   only the rows without | with the egress policies
//   node scripts/bench-datapath.ts --candidate FILE.ts   a module exporting render(state, node): string
//                                                        measured instead of the project's renderer
//   node scripts/bench-datapath.ts --cnp --tier-layout shared|per-class|auto
//                                                        the tiers' layout (compile/tiers.ts) the rulesets are
//                                                        compiled with; default: the agent's (DEFAULT_TIER_LAYOUT)
import { execa } from 'execa';
import type { ResultPromise } from 'execa';
import { cpus, loadavg } from 'node:os';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { ClusterState } from '../src/model/types.ts';
import { runNft } from '../src/nft/exec.ts';
import { DEFAULT_TIER_LAYOUT, parseTierLayout } from '../src/ruleset/options.ts';
import { renderNode } from '../test/support/render-node.ts';
import { Cluster } from '../test/harness/cluster.ts';
import { runIn } from '../test/harness/netns.ts';
import { perfAvailable, profiled, symbolDelta } from './datapath/cpu-profile.ts';
import type { CpuUse } from './datapath/cpu-profile.ts';
import {
  ALLOWED_PORT,
  baseline,
  benchState,
  cnpBenchState,
  DENIED_PORT,
  stagedBenchState,
  NS,
  SYN_ALLOWED_PORT,
  TABLE,
} from './datapath/bench-state.ts';
import type { CnpPath } from './datapath/bench-state.ts';
import { scriptArgs } from './script-args.ts';
const here = new URL('.', import.meta.url).pathname;

const median = (xs: readonly number[]): number => quantile(xs, 0.5);
/** The q-quantile (nearest rank) of xs; 0 for none. */
function quantile(xs: readonly number[], q: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.round(q * (s.length - 1))))] ?? 0;
}

type Renderer = (s: ClusterState, nodeName: string) => string;

interface Bench {
  readonly cluster: Cluster;
  readonly router: string;
  readonly client: { netns: string; ip: string };
  readonly server: { netns: string; ip: string };
}

async function load(netns: string, text: string): Promise<void> {
  const r = await runNft(text, { netns });
  if (!r.ok) throw new Error(`nft -f: ${r.error.slice(0, 500)}`);
}

async function flushConntrack(b: Bench): Promise<void> {
  await runIn(b.router, 'conntrack', ['-F'], { reject: false });
}

/** One measured run: units (connections or SYNs) per second, and, under perf, CPU per unit. */
interface Run {
  readonly rate: number;
  readonly units: number;
  /** The run's profile (undefined without perf). */
  readonly profile?: CpuUse;
  /** Machine CPU per unit, microseconds (undefined without perf). */
  readonly cpu?: number;
  /** nftables evaluation per unit, nanoseconds (undefined without perf). */
  readonly nft?: number;
}

/** Runs a load generator in `netns`, under perf when `o.perf`. */
async function measured(o: Opts, netns: string, cmd: string, args: readonly string[]): Promise<{ stdout: string; cpu?: CpuUse }> {
  if (!o.perf) return { stdout: (await runIn(netns, cmd, [...args])).stdout };
  return profiled(netns, cmd, args);
}

function run(units: number, secs: number, cpu: CpuUse | undefined): Run {
  const rate = units / secs;
  if (cpu === undefined || units === 0) return { rate, units };
  return { rate, units, profile: cpu, cpu: cpu.busyUs / units, nft: (cpu.nftUs / units) * 1000 };
}

/** New connections per second (one run). */
async function connRate(b: Bench, o: Opts): Promise<Run> {
  await flushConntrack(b);
  const r = await measured(o, b.client.netns, process.execPath, [
    `${here}datapath/load.ts`,
    'connect',
    b.server.ip,
    String(ALLOWED_PORT),
    String(o.conns),
    String(o.concurrency),
  ]);
  const out = JSON.parse(r.stdout) as { count: number; errors: number; ms: number };
  if (out.errors > 0) throw new Error(`${out.errors} of ${out.count} connections failed: the path is not allowed`);
  return run(out.count, out.ms / 1000, r.cpu);
}

/** Sum of the drop counters of our table. */
async function dropped(b: Bench): Promise<number> {
  const r = await runIn(b.router, 'nft', ['list', 'table', 'inet', TABLE]);
  let sum = 0;
  for (const m of r.stdout.matchAll(/counter packets (\d+) bytes \d+ (?:drop|reject)/g)) sum += Number(m[1]);
  return sum;
}

/**
 * SYNs per second (one run): to the denied port, those the node drops; to the
 * allowed port (where nothing listens: the server answers RST, a reply), those
 * it forwards, i.e. all sent when none was dropped. The sender is pinned to
 * one CPU: its packets cross the client's stack, the node's forward hook and
 * the server's stack in its own context, on that CPU, as softirq work.
 */
async function synRate(b: Bench, o: Opts, allowed: boolean): Promise<Run> {
  await flushConntrack(b);
  const before = await dropped(b);
  const r = await measured(o, b.client.netns, 'taskset', [
    '-c',
    String(cpus().length - 1),
    'python3',
    `${here}datapath/syn.py`,
    b.client.ip,
    b.server.ip,
    String(allowed ? SYN_ALLOWED_PORT : DENIED_PORT),
    String(o.seconds),
  ]);
  const [sent = 0, secs = 1] = r.stdout.trim().split(' ').map(Number);
  const n = (await dropped(b)) - before;
  if (allowed && n > 0) throw new Error(`${n} SYNs to the allowed port were dropped`);
  if (!allowed && n < sent * 0.99) throw new Error(`${sent - n} of ${sent} SYNs to the denied port were not dropped`);
  return run(sent, secs, r.cpu);
}

interface Opts {
  readonly runs: number;
  readonly conns: number;
  readonly concurrency: number;
  readonly seconds: number;
  readonly perf: boolean;
  readonly verbose: boolean;
}

/** One path's figures: medians, and ratios as medians over the alternating pairs. */
interface PathFigures {
  readonly rate: number;
  readonly baseRate: number;
  /** Throughput, ruleset over baseline: the median over the pairs. */
  readonly ratio: number;
  /** The pairs' ratios' lower and upper quartiles (their spread). */
  readonly ratioLo: number;
  readonly ratioHi: number;
  /**
   * The ratio the nftables time implies (NaN without perf): B / (B + nft +ns),
   * B the least disturbed cost of a unit in the baseline runs: the least of
   * its machine CPU per unit and of the CPUs the path keeps busy over its
   * best rate (the whole-machine CPU counts other jobs too). Immune to the
   * other jobs' load on the ruleset runs.
   */
  readonly nftRatio: number;
  /** B above, microseconds. */
  readonly unitUs: number;
  /** nftables ns per unit the ruleset adds over the baseline (NaN without perf). */
  readonly nftExtra: number;
  /**
   * Baseline machine CPU per unit over the ruleset's (NaN without perf): the
   * throughput ratio of a CPU-bound node, without the time the VM lost.
   */
  readonly cpuRatio: number;
}

/** `cpusBusy`: how many CPUs the path's load keeps busy (the pinned SYN sender: 1). */
function figures(rules: readonly Run[], base: readonly Run[], cpusBusy: number): PathFigures {
  const pairs = rules.map((r, i) => [r, base[i] ?? r] as const);
  const perfOk = pairs.every(([r, b]) => r.nft !== undefined && b.nft !== undefined && b.cpu !== undefined);
  const ratios = pairs.map(([r, b]) => r.rate / b.rate);
  const nftExtra = perfOk ? median(pairs.map(([r, b]) => (r.nft ?? 0) - (b.nft ?? 0))) : NaN;
  const unitUs = perfOk ? Math.min(...base.map((b) => b.cpu ?? Infinity), ...base.map((b) => (cpusBusy * 1e6) / b.rate)) : NaN;
  return {
    rate: median(rules.map((r) => r.rate)),
    baseRate: median(base.map((r) => r.rate)),
    ratio: median(ratios),
    ratioLo: quantile(ratios, 0.25),
    ratioHi: quantile(ratios, 0.75),
    nftRatio: unitUs / (unitUs + nftExtra / 1000),
    unitUs,
    nftExtra,
    cpuRatio: perfOk ? median(pairs.map(([r, b]) => (b.cpu ?? 0) / (r.cpu ?? 1))) : NaN,
  };
}

/**
 * Alternating runs of `text` and the baseline (`text` undefined: the
 * baseline against itself, the measurement's own noise).
 */
async function compare(b: Bench, text: string | undefined, o: Opts): Promise<Record<'conns' | 'syns' | 'denied', PathFigures>> {
  const runs = { conns: [[], []], syns: [[], []], denied: [[], []] } as Record<'conns' | 'syns' | 'denied', [Run[], Run[]]>;
  for (let i = 0; i < o.runs; i++) {
    // A B B A A B ...: which goes first alternates, so a drift in the machine's load hits both alike.
    const ab = [
      [1, baseline(true)],
      [0, text ?? baseline(true)],
    ] as const;
    for (const [k, t] of i % 2 === 0 ? ab : [...ab].reverse()) {
      await load(b.router, t);
      runs.conns[k].push(await connRate(b, o));
      runs.syns[k].push(await synRate(b, o, true));
      runs.denied[k].push(await synRate(b, o, false));
    }
  }
  if (o.verbose)
    for (const [k, [rules, base]] of Object.entries(runs)) {
      const prof = (rs: readonly Run[]) =>
        rs.flatMap((r) => (r.profile === undefined ? [] : [{ cpu: r.profile, units: r.units }]));
      const top = symbolDelta(prof(rules), prof(base)).slice(0, 12);
      console.log(
        `  ${k}: ns per unit over the baseline, by function: ${top.map(([f, ns]) => `${f} ${ns.toFixed(0)}`).join(', ')}`,
      );
    }
  return {
    conns: figures(...runs.conns, cpus().length),
    syns: figures(...runs.syns, 1),
    denied: figures(...runs.denied, 1),
  };
}

function printTable(rows: readonly (readonly string[])[]): void {
  const widths = rows[0]?.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length))) ?? [];
  for (const r of rows) console.log(`| ${r.map((x, i) => x.padStart(widths[i] ?? 0)).join(' | ')} |`);
}

async function main(): Promise<void> {
  const { values } = scriptArgs(import.meta.url, {
    options: {
      policies: { type: 'string' },
      runs: { type: 'string' },
      conns: { type: 'string' },
      concurrency: { type: 'string' },
      seconds: { type: 'string' },
      candidate: { type: 'string' },
      'tier-layout': { type: 'string' },
      'no-egress': { type: 'boolean' },
      'egress-only': { type: 'boolean' },
      'no-perf': { type: 'boolean' },
      'no-self': { type: 'boolean' },
      verbose: { type: 'boolean' },
      updates: { type: 'boolean' },
      cnp: { type: 'boolean' },
      'cnp-path': { type: 'string' },
      staged: { type: 'boolean' },
    },
  });
  const counts = (values.policies ?? (values.staged === true ? '100' : '1,10,100,1000')).split(',').map(Number);
  const o: Opts = {
    runs: Number(values.runs ?? 7),
    conns: Number(values.conns ?? 5_000),
    concurrency: Number(values.concurrency ?? 32),
    seconds: Number(values.seconds ?? 1),
    perf: values['no-perf'] !== true && (await perfAvailable()),
    verbose: values.verbose === true,
  };
  const tierLayout = parseTierLayout(values['tier-layout']);
  let render: Renderer = (s, n) =>
    renderNode(s, n, { denyAction: 'drop', ...(tierLayout === undefined ? {} : { tierLayout }) }).text;
  if (values.candidate !== undefined) {
    if (tierLayout !== undefined) throw new Error('--tier-layout: not with --candidate (the module renders)');
    const mod = (await import(pathToFileURL(resolve(values.candidate)).href)) as { render: Renderer };
    render = mod.render;
  }

  const cluster = await Cluster.create({
    style: 'routed',
    nodes: [{ name: 'node-1' }, { name: 'node-2' }],
    pods: [
      { key: `${NS}/client`, node: 'node-1' },
      { key: `${NS}/server`, node: 'node-1' },
    ],
    nodeAgents: false,
  });
  let server: ResultPromise | undefined;
  try {
    const c = cluster.pod(`${NS}/client`);
    const s = cluster.pod(`${NS}/server`);
    const b: Bench = {
      cluster,
      router: cluster.node('node-1').netns,
      client: { netns: c.netns, ip: c.ips.v4 },
      server: { netns: s.netns, ip: s.ips.v4 },
    };
    server = execa('ip', ['netns', 'exec', s.netns, process.execPath, `${here}datapath/load.ts`, 'serve', String(ALLOWED_PORT)]);
    server.catch(() => undefined); // killed at the end
    await new Promise<void>((ok) => server?.stdout?.once('data', () => ok()));

    console.log(
      `node ${process.version}, ${cpus().length} x ${cpus()[0]?.model ?? '?'}, ${new Date().toISOString().slice(0, 16)}Z` +
        `; ${values.candidate ?? `project renderer, tier layout ${tierLayout ?? `${DEFAULT_TIER_LAYOUT} (default)`}`}`,
    );
    console.log(
      `conns: new TCP connections/s (${o.conns} per run, ${o.concurrency} at a time); allowed SYN: SYNs/s forwarded to an allowed port; ` +
        `denied SYN: SYNs/s dropped (${o.seconds} s per run, sender pinned to CPU ${cpus().length - 1}); ${o.runs} runs alternating with the baseline ` +
        `(ABBA: the first of each pair alternates), medians; ratio = median over the pairs of ruleset/baseline, [lower-upper quartile]`,
    );
    console.log(
      `load average at start: ${loadavg()
        .map((x) => x.toFixed(2))
        .join(' ')}`,
    );
    console.log(
      o.perf
        ? 'cost (perf, whole machine): nft +ns = nftables evaluation per unit over the baseline (median over the pairs); ' +
            'CPU ratio = baseline CPU per unit / ruleset CPU per unit; ' +
            'nft ratio = B / (B + nft +ns), B = the least disturbed cost of a unit in the baseline runs: the least of its ' +
            'machine CPU per unit and of busy CPUs / rate (SYNs: 1 CPU, conns: all); B us in the last column ' +
            '(the steady figure: the nftables time is what the ruleset adds)'
        : 'perf not available (or --no-perf): throughput only',
    );
    const paths = ['conns', 'allowed SYN', 'denied SYN'] as const;
    const rate: string[][] = [['policies', 'egress too', ...paths.flatMap((p) => [`${p}/s`, 'base', 'ratio'])]];
    const cost: string[][] = [
      ['policies', 'egress too', ...paths.flatMap((p) => [`${p} nft +ns`, 'CPU ratio', 'nft ratio', 'B us'])],
    ];
    // With --cnp: 1000 NetworkPolicies plus 100 ClusterNetworkPolicies of 25 rules (cnpBenchState), the client decided by an Admin Accept or Pass.
    // With --staged: the same one enforced policy without (staged 0) and with n staged ones.
    type Config = [number | CnpPath | undefined, boolean];
    const configs: Config[] = values['no-self'] === true ? [] : [[undefined, false]];
    for (const egress of values['no-egress'] === true ? [false] : values['egress-only'] === true ? [true] : [false, true]) {
      if (values.staged === true) configs.push([0, egress]);
      const cnpPaths: readonly CnpPath[] =
        values['cnp-path'] === 'accept' || values['cnp-path'] === 'pass' ? [values['cnp-path']] : ['accept', 'pass'];
      for (const n of values.cnp === true ? cnpPaths : counts) configs.push([n, egress]);
    }
    for (const [n, egress] of configs) {
      const state =
        n === undefined
          ? undefined
          : typeof n === 'number'
            ? values.staged === true
              ? n === 0
                ? benchState(1, egress, b.client.ip, b.server.ip)
                : stagedBenchState(n, egress, b.client.ip, b.server.ip)
              : benchState(n, egress, b.client.ip, b.server.ip)
            : cnpBenchState(egress, n, b.client.ip, b.server.ip);
      const text = state === undefined ? undefined : render(state, 'node-1');
      const r = await compare(b, text, o);
      const head = [
        n === undefined
          ? 'baseline itself'
          : typeof n === 'number'
            ? values.staged === true
              ? `1 + ${n} staged`
              : String(n)
            : `1000 + 100 CNP (${n})`,
        egress ? 'yes' : 'no',
      ];
      const fs = [r.conns, r.syns, r.denied];
      const spread = (f: PathFigures): string => `${f.ratio.toFixed(2)} [${f.ratioLo.toFixed(2)}-${f.ratioHi.toFixed(2)}]`;
      rate.push([...head, ...fs.flatMap((f) => [f.rate.toFixed(0), f.baseRate.toFixed(0), spread(f)])]);
      cost.push([
        ...head,
        ...fs.flatMap((f) => [f.nftExtra.toFixed(0), f.cpuRatio.toFixed(2), f.nftRatio.toFixed(2), f.unitUs.toFixed(1)]),
      ]);
      console.log(
        [...head, ...fs.flatMap((f) => [spread(f), f.nftExtra.toFixed(0), f.cpuRatio.toFixed(2), f.nftRatio.toFixed(2)])].join(
          '  ',
        ),
      );
    }
    console.log('');
    printTable(rate);
    if (o.perf) {
      console.log('');
      printTable(cost);
    }
    console.log(
      `load average at end: ${loadavg()
        .map((x) => x.toFixed(2))
        .join(' ')}`,
    );
  } finally {
    server?.kill();
    await cluster.destroy();
  }
  if (values.updates === true) {
    console.log('\nOne element update and one policy change at 100k pods (scripts/bench-update.ts):');
    await execa(process.execPath, [`${here}bench-update.ts`], { stdio: 'inherit' });
  }
}

await main();
