import { generateCluster } from './gen-cluster.ts';
import { renderNode } from '../src/nft/render.ts';
import { makeState } from '../src/model/normalize.ts';
import { podIPOwners, releasedIPs } from '../src/agent/local-view.ts';
import { diffInvalid } from '../src/agent/invalid-policies.ts';
import { runNft, listTable } from '../src/nft/exec.ts';
import { normalizeListing } from '../src/agent/drift.ts';
import { execa } from 'execa';
const N = Number(process.argv[2] ?? 100000);
const gen = generateCluster({ pods: N, policies: N / 10, namespaces: N / 20 });
const node = gen.nodes[0]!;
const t = (label: string, f: () => unknown) => { const a = performance.now(); const r = f(); console.log(label, (performance.now() - a).toFixed(1), 'ms'); return r; };
const ta = async (label: string, f: () => Promise<unknown>) => { const a = performance.now(); const r = await f(); console.log(label, (performance.now() - a).toFixed(1), 'ms'); return r; };
for (let i = 0; i < 3; i++) t('makeState', () => makeState({ namespaces: [...gen.state.namespaces], pods: [...gen.state.pods], policies: [...gen.state.policies], nodes: [...gen.state.nodes] }));
let r: any;
for (let i = 0; i < 3; i++) r = t('render', () => renderNode(gen.state, node));
for (let i = 0; i < 3; i++) t('owners', () => podIPOwners(gen.state));
const o = podIPOwners(gen.state);
t('released', () => releasedIPs(o, o));
t('diffInvalid', () => diffInvalid(new Map(), gen.state));
await execa('ip', ['netns', 'add', 'zz-prof']);
try {
  for (let i = 0; i < 3; i++) await ta('nft -f (netns)', () => runNft(r.text, { netns: 'zz-prof' }));
  let l: any;
  for (let i = 0; i < 3; i++) l = await ta('list (netns)', () => listTable('nft-netpol', { netns: 'zz-prof' }));
  t('normalize', () => normalizeListing(l));
  console.log('text KiB', (r.text.length / 1024).toFixed(0), 'listing KiB', (l.length / 1024).toFixed(0), r.stats);
} finally { await execa('ip', ['netns', 'del', 'zz-prof']); }
