// Benchmark: what the kernel's validation of verdict-map `jump`s costs one
// commit on a 100k-pod node, and what two lookups without them would save
// (docs/benchmarks.md, "The kernel's validation at 100k"). The first node of
// scripts/gen-cluster.ts's cluster (bench-agent.ts's node) is rendered and
// loaded three times into scratch network namespaces:
//   map     the ruleset without the split (every address -> jump identity chain)
//   split   the project's ruleset: the biggest identity of each pod peer map
//           in a plain set (compile/peer-split.ts)
//   bits    every pod peer map as plain bit sets and a tree of chains
//           (a text prototype, scripts/datapath/peer-lookup-variants.ts)
//   mark    every pod peer map as a data map (address -> identity number)
//           read into the packet mark, a small verdict map on the mark, and a
//           plain set per identity for packets that arrive marked (a text
//           prototype, scripts/datapath/candidate-peer-mark.ts)
// Then, alternating, one remote pod's address per run enters an identity: a
// small one (not split) in map, split and bits, the biggest one in split's
// plain set; and an `accept` element is added to the local dispatch map (no
// `jump`: nothing to validate), the floor. Each is one `nft -f` (process
// start included), timed as a whole. Prints medians; asserts nothing. Root.
// The per-packet side: bench-datapath.ts --candidate
// scripts/datapath/candidate-peer-split.ts | candidate-peer-bits.ts.
//
//   node scripts/bench-peer-lookup.ts [--pods 100000] [--runs 30] [--bits-depth 7]
import { execa } from 'execa';
import { randomBytes } from 'node:crypto';
import { cpus, loadavg } from 'node:os';
import { runNft } from '../src/nft/exec.ts';
import { renderNode } from '../test/support/render-node.ts';
import { SPLIT_IDENTITIES } from '../src/compile/peer-split.ts';
import { peerMapsAsBits } from './datapath/peer-lookup-variants.ts';
import { markLookup } from './datapath/candidate-peer-mark.ts';
import { generateCluster } from './gen-cluster.ts';
import { scriptArgs } from './script-args.ts';

const { values: args } = scriptArgs(import.meta.url, {
  options: {
    pods: { type: 'string', default: '100000' },
    runs: { type: 'string', default: '30' },
    'bits-depth': { type: 'string', default: '7' },
  },
});
const pods = Number(args.pods);
const runs = Number(args.runs);
const splitK = SPLIT_IDENTITIES;

const gen = generateCluster({ pods, policies: Math.round(pods / 10), namespaces: Math.round(pods / 20) });
const node = gen.nodes[0] ?? 'node-00000';
// No identity is big enough to leave its map: the ruleset as it was before the split.
const text = renderNode(gen.state, node, { peerSplitMin: Number.MAX_SAFE_INTEGER }).text;
const map = /\tmap ingress-peers-v4 \{\n\t\ttype ipv4_addr : verdict\n\t\telements = \{([^}]*)\}/.exec(text);
if (map === null) throw new Error(`node ${node}: no ingress-peers-v4 elements`);
const count = new Map<string, number>();
for (const m of map[1]!.matchAll(/ : jump ([A-Za-z0-9-]+)/g)) count.set(m[1]!, (count.get(m[1]!) ?? 0) + 1);
const bySize = [...count.entries()].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1));
const small = bySize[bySize.length - 1]![0];
const chains = [...count.keys()].sort();
const smallIndex = chains.indexOf(small) + 1;
const depth = Math.max(Number(args['bits-depth']), chains.length.toString(2).length);
const elements = [...count.values()].reduce((a, b) => a + b, 0);

const variants = {
  map: text,
  split: renderNode(gen.state, node).text,
  bits: peerMapsAsBits(text, depth),
  mark: markLookup(text),
};
const tag = randomBytes(3).toString('hex');
const ns = (v: string): string => `nftnp-pl-${tag}-${v}`;
const T = 'add element inet nft-netpol';

// Below SPLIT_MIN addresses (1k pods) no identity leaves its map: the plain-set case is left out.
const hasSplit = variants.split.includes('\tset ingress-peers-v4-big {');
const cases: { name: string; ns: string; script: (addr: string) => string }[] = [
  {
    name: 'map: address into a small identity (jump element)',
    ns: ns('map'),
    script: (a) => `${T} ingress-peers-v4 { ${a} : jump ${small} }\n`,
  },
  {
    name: 'split: the same (jump element, smaller map)',
    ns: ns('split'),
    script: (a) => `${T} ingress-peers-v4 { ${a} : jump ${small} }\n`,
  },
  ...(hasSplit
    ? [
        {
          name: 'split: address into the biggest identity (plain set)',
          ns: ns('split'),
          script: (a: string) => `${T} ingress-peers-v4-big { ${a} }\n`,
        },
      ]
    : []),
  {
    name: 'bits: address into a small identity (plain sets)',
    ns: ns('bits'),
    script: (a) =>
      `${T} ingress-peers-v4 { ${a} }\n` +
      Array.from({ length: depth }, (_, b) => ((smallIndex >> b) & 1 ? `${T} ingress-peers-v4-b${b} { ${a} }\n` : '')).join(''),
  },
  {
    name: 'mark: address into a small identity (data map element, set element)',
    ns: ns('mark'),
    // candidate-peer-mark.ts numbers identities 1.. in the order of their chains' names, as `chains` here.
    script: (a) => `${T} ingress-peers-v4 { ${a} : ${smallIndex} }\n${T} ingress-peers-v4-s${smallIndex} { ${a} }\n`,
  },
  ...(['map', 'split', 'mark'] as const).map((v) => ({
    name: `${v}: a policy's new rule (a chain with counter accept)`,
    ns: ns(v),
    script: (a: string) => {
      const c = `KUBE-BENCH-${a.replace(/\./g, '-')}`;
      return `add chain inet nft-netpol ${c}\nadd rule inet nft-netpol ${c} counter accept\n`;
    },
  })),
  {
    name: 'floor: an accept element into the dispatch map (nothing to validate)',
    ns: ns('map'),
    script: (a) => `${T} egress-v4 { ${a} : accept }\n`,
  },
];

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;
const q1 = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 4)] ?? 0;

try {
  for (const [v, t] of Object.entries(variants)) {
    await execa('ip', ['netns', 'add', ns(v)]);
    const r = await runNft(t, { netns: ns(v) });
    if (!r.ok) throw new Error(`${v}: ${r.error}`);
  }
  const times = cases.map(() => [] as number[]);
  for (let i = 0; i < runs; i++) {
    const order = i % 2 === 0 ? cases.map((_, j) => j) : cases.map((_, j) => cases.length - 1 - j);
    for (const j of order) {
      const c = cases[j]!;
      // 100.64.0.0/10: no pod of the generated cluster lives there.
      const addr = `100.${64 + j}.${Math.floor(i / 250)}.${(i % 250) + 1}`;
      const t0 = process.hrtime.bigint();
      const r = await runNft(c.script(addr), { netns: c.ns });
      const dt = Number(process.hrtime.bigint() - t0) / 1e6;
      if (!r.ok) throw new Error(`${c.name}: ${r.error}`);
      times[j]!.push(dt);
    }
  }
  console.log(
    `node ${process.version}, ${cpus().length} x ${cpus()[0]?.model ?? '?'}, ${new Date().toISOString()}, load ${loadavg()
      .map((x) => x.toFixed(2))
      .join(' ')}`,
  );
  console.log(
    `${pods} pods, node ${node}: ingress-peers-v4 has ${elements} elements over ${count.size} identity chains (biggest ${bySize[0]![1]}); ${hasSplit ? `split k=${splitK} leaves ${elements - bySize.slice(0, splitK).reduce((a, [, n]) => a + n, 0)} in the map` : 'nothing split'}; bits depth ${depth}`,
  );
  console.log(`one nft -f per commit (process start included), ${runs} runs alternating; ms median / q1`);
  cases.forEach((c, j) =>
    console.log(`  ${median(times[j]!).toFixed(1).padStart(6)} / ${q1(times[j]!).toFixed(1).padStart(6)}  ${c.name}`),
  );
} finally {
  for (const v of Object.keys(variants)) await execa('ip', ['netns', 'del', ns(v)], { reject: false });
}
