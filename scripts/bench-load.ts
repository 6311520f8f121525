// Big manifest files through the CLI: `validate`, `render` and `explain` on a
// generated ~20 MB file (30k NetworkPolicies, 12k pods, 200 namespaces), each
// run as its own child process, reporting wall time, CPU time (user+sys) and
// peak RSS. With `--baseline REF` the same commands of that git revision run
// too, alternating with the current tree's run by run, so both see the same
// machine load (the machine is shared: wall time swings, CPU time much less).
//
//   node scripts/bench-load.ts [--baseline main] [--runs 3] [--file big.yaml]
//        [--policies 30000 --pods 12000 --namespaces 200]
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { execa } from 'execa';
import { stringify } from 'yaml';
import { clusterObjects, DEFAULT_GEN, generateCluster } from './gen-cluster.ts';
import { isActivePod, type Pod } from '../src/model/types.ts';
import { scriptArgs } from './script-args.ts';

interface Run {
  readonly wallS: number;
  readonly cpuS: number;
  readonly rssMiB: number;
  readonly exitCode: number;
  readonly outBytes: number;
  readonly outHash: string;
}

const ROOT = resolve(import.meta.dirname, '..');

// Loaded into each child: its own peak RSS and CPU time, written at exit.
const RUSAGE_HOOK =
  'data:text/javascript,import{writeFileSync}from"node:fs";process.on("exit",()=>{const u=process.resourceUsage();' +
  'writeFileSync(process.env.BENCH_RUSAGE_FILE,JSON.stringify({maxRSS:u.maxRSS,cpu:u.userCPUTime+u.systemCPUTime}))})';

function generate(file: string, pods: number, policies: number, namespaces: number): { from: string; to: string } {
  const c = generateCluster({ ...DEFAULT_GEN, pods, policies, namespaces });
  writeFileSync(
    file,
    clusterObjects(c)
      .map((o) => stringify(o))
      .join('---\n'),
  );
  return endpoints([...c.state.pods]);
}

/** Two running pods with addresses in different namespaces: deterministic for a given file. */
function endpoints(pods: readonly Pod[]): { from: string; to: string } {
  const active = pods.filter(isActivePod);
  const from = active[Math.floor(active.length / 4)];
  const to = active.find((p, i) => i > active.length / 2 && p.namespace !== from?.namespace);
  if (from === undefined || to === undefined) throw new Error('no two running pods in different namespaces');
  return { from: `${from.namespace}/${from.name}`, to: `${to.namespace}/${to.name}` };
}

/** The CLI of a git revision, unpacked beside the current tree's node_modules. */
async function checkout(ref: string): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), 'bench-load-'));
  const tar = await execa('git', ['-C', ROOT, 'archive', '--format=tar', ref, 'src', 'package.json'], { encoding: 'buffer' });
  await execa('tar', ['-x', '-C', dir], { input: tar.stdout });
  symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'));
  return dir;
}

async function runOnce(tree: string, args: readonly string[]): Promise<Run> {
  const usageFile = join(tmpdir(), `bench-load-${process.pid}.json`);
  const t0 = performance.now();
  const r = await execa(process.execPath, ['--import', RUSAGE_HOOK, join(tree, 'src/cli/main.ts'), ...args], {
    reject: false,
    env: { BENCH_RUSAGE_FILE: usageFile },
    maxBuffer: 1 << 30,
  });
  const wallS = (performance.now() - t0) / 1000;
  const u = JSON.parse(readFileSync(usageFile, 'utf8')) as { maxRSS: number; cpu: number };
  rmSync(usageFile, { force: true });
  if (r.exitCode !== 0) throw new Error(`${args[0]} exited ${r.exitCode}: ${r.stderr.slice(0, 500)}`);
  return {
    wallS,
    cpuS: u.cpu / 1e6,
    rssMiB: u.maxRSS / 1024,
    exitCode: r.exitCode ?? -1,
    outBytes: Buffer.byteLength(r.stdout),
    outHash: createHash('sha256').update(r.stdout).digest('hex').slice(0, 12),
  };
}

const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] ?? NaN;
};

async function main(): Promise<void> {
  const { values } = scriptArgs(import.meta.url, {
    options: {
      baseline: { type: 'string' },
      runs: { type: 'string', default: '3' },
      file: { type: 'string' },
      pods: { type: 'string', default: '12000' },
      policies: { type: 'string', default: '30000' },
      namespaces: { type: 'string', default: '200' },
      from: { type: 'string' },
      to: { type: 'string' },
    },
  });
  const runs = Number(values.runs);
  const work = mkdtempSync(join(tmpdir(), 'bench-load-data-'));
  let file = values.file;
  let eps: { from: string; to: string };
  if (file === undefined) {
    file = join(work, 'cluster.yaml');
    eps = generate(file, Number(values.pods), Number(values.policies), Number(values.namespaces));
  } else {
    if (values.from === undefined || values.to === undefined) throw new Error('--file needs --from and --to (NS/POD)');
    eps = { from: values.from, to: values.to };
  }
  const policies = (readFileSync(file, 'utf8').match(/^kind: NetworkPolicy$/gm) ?? []).length;
  console.log(
    `input: ${file}: ${(statSync(file).size / 1e6).toFixed(1)} MB, ${policies} NetworkPolicies; explain --from ${eps.from} --to ${eps.to}`,
  );
  const node = 'node-00000';
  const commands: Record<string, string[]> = {
    validate: ['validate', '-f', file],
    render: ['render', '--node', node, '-f', file],
    explain: ['explain', '-f', file, '--from', eps.from, '--to', eps.to, '--port', '80'],
  };
  const trees: [string, string][] = [['current', ROOT]];
  if (values.baseline !== undefined) trees.unshift([`baseline ${values.baseline}`, await checkout(values.baseline)]);
  const results = new Map<string, Run[]>();
  try {
    for (let i = 0; i < runs; i++) {
      for (const [cmd, args] of Object.entries(commands)) {
        for (const [name, tree] of trees) {
          const r = await runOnce(tree, args);
          const key = `${cmd}\t${name}`;
          results.set(key, [...(results.get(key) ?? []), r]);
          console.error(
            `run ${i + 1} ${cmd} ${name}: ${r.wallS.toFixed(2)} s wall, ${r.cpuS.toFixed(2)} s cpu, ${r.rssMiB.toFixed(0)} MiB`,
          );
        }
      }
    }
  } finally {
    for (const [name, tree] of trees) if (name !== 'current') rmSync(tree, { recursive: true, force: true });
    rmSync(work, { recursive: true, force: true });
  }
  console.log(`\n${runs} runs each, alternating; medians of wall and CPU time, the highest peak RSS`);
  console.log('command   tree                  wall s   cpu s   peak RSS MiB   stdout bytes   stdout sha256');
  for (const [key, rs] of results) {
    const [cmd, name] = key.split('\t') as [string, string];
    const hashes = [...new Set(rs.map((r) => r.outHash))].join(',');
    console.log(
      `${cmd.padEnd(9)} ${name.padEnd(20)} ${median(rs.map((r) => r.wallS))
        .toFixed(2)
        .padStart(7)} ${median(rs.map((r) => r.cpuS))
        .toFixed(2)
        .padStart(7)} ${Math.max(...rs.map((r) => r.rssMiB))
        .toFixed(0)
        .padStart(14)} ${String(rs[0]?.outBytes ?? 0).padStart(14)}   ${hashes}`,
    );
  }
  if (trees.length === 2) {
    console.log('\nspeed-up (baseline / current, medians): wall, cpu');
    for (const cmd of Object.keys(commands)) {
      const b = results.get(`${cmd}\tbaseline ${values.baseline}`) ?? [];
      const c = results.get(`${cmd}\tcurrent`) ?? [];
      const ratio = (f: (r: Run) => number): string => (median(b.map(f)) / median(c.map(f))).toFixed(1);
      console.log(`${cmd.padEnd(9)} ${ratio((r) => r.wallS)}x  ${ratio((r) => r.cpuS)}x`);
    }
  }
}

await main();
