// bench-datapath.ts --candidate: a text prototype of a peer lookup without a
// verdict map per address (docs/benchmarks.md, "A peer lookup the kernel does
// not walk"). Each pod peer map `<dir>-peers-v4|v6` (address -> jump to its
// identity chain) becomes:
//   - a data map `address : mark` (an identity number): the kernel's commit
//     validation walks verdict maps only, so its size costs no commit;
//   - fast path, for packets whose mark is 0: `meta mark set <addr> map @m`,
//     then `meta mark vmap @m-ids` (identity number -> jump a trampoline that
//     gives the mark back, `meta mark set 0`, and goes to the identity chain);
//   - slow path, for packets that arrive marked (kube-proxy's 0x4000, a mesh):
//     one plain set per identity, tested in turn (nothing to give back).
// The project's ruleset otherwise (no split). PEER_MARK_INLINE=1 puts the
// fast path in one rule of the lookup chain. PEER_MARK_PREMARK=1 marks every
// forwarded packet first (a base chain at priority filter - 10), to measure
// the slow path.
import type { ClusterState } from '../../src/model/types.ts';
import { renderNode } from '../../test/support/render-node.ts';

export function markLookup(text: string): string {
  let out = text;
  const maps =
    /\tmap ((?:ingress|egress)-peers-v([46])) \{\n\t\ttype ipv[46]_addr : verdict\n(?:\t\telements = \{([^}]*)\}\n)?\t\}\n/g;
  for (const m of [...text.matchAll(maps)]) {
    const [whole, name, fam, body] = m as unknown as [string, string, string, string | undefined];
    const ip = fam === '4' ? 'ip' : 'ip6';
    const field = name.startsWith('ingress') ? 'saddr' : 'daddr';
    const elements = [...(body ?? '').matchAll(/([0-9a-f.:]+) : jump ([A-Za-z0-9-]+)/g)].map((e) => [e[1]!, e[2]!] as const);
    const chains = [...new Set(elements.map(([, c]) => c))].sort();
    const id = new Map(chains.map((c, i) => [c, i + 1]));
    const list = (xs: readonly string[]): string => (xs.length === 0 ? '' : `\t\telements = { ${xs.join(', ')} }\n`);
    const parts = [
      `\tmap ${name} {\n\t\ttype ipv${fam}_addr : mark\n${list(elements.map(([a, c]) => `${a} : ${id.get(c)}`))}\t}\n`,
      ...chains.map(
        (c) =>
          `\tset ${name}-s${id.get(c)} {\n\t\ttype ipv${fam}_addr\n${list(elements.filter(([, x]) => x === c).map(([a]) => a))}\t}\n`,
      ),
      ...chains.map((c) => `\tchain ${name}-t${id.get(c)} {\n\t\tmeta mark set 0\n\t\tgoto ${c}\n\t}\n`),
      `\tmap ${name}-ids {\n\t\ttype mark : verdict\n${list(chains.map((c) => `${id.get(c)} : jump ${name}-t${id.get(c)}`))}\t}\n`,
      `\tchain ${name}-mark {\n\t\tmeta mark set ${ip} ${field} map @${name}\n\t\tmeta mark vmap @${name}-ids\n\t\tmeta mark set 0\n\t}\n`,
      `\tchain ${name}-sets {\n${chains.map((c) => `\t\t${ip} ${field} @${name}-s${id.get(c)} jump ${c}\n`).join('')}\t}\n`,
    ];
    out = out.replace(whole, parts.join('\n'));
    // PEER_MARK_INLINE=1: the fast path in one rule of the lookup chain (no chain of its own; a miss leaves the mark 0).
    const fast =
      process.env['PEER_MARK_INLINE'] === '1'
        ? `meta mark 0 meta mark set ${ip} ${field} map @${name} meta mark vmap @${name}-ids`
        : `meta mark 0 jump ${name}-mark`;
    out = out.replace(`\t\t${ip} ${field} vmap @${name}\n`, `\t\t${fast}\n\t\tmeta mark != 0 jump ${name}-sets\n`);
  }
  if (process.env['PEER_MARK_PREMARK'] === '1')
    out = out.replace(
      /\n\}\n?$/,
      '\n\tchain premark {\n\t\ttype filter hook forward priority filter - 10; policy accept;\n\t\tmeta mark set 0x4000\n\t}\n}\n',
    );
  return out;
}

export function render(state: ClusterState, node: string): string {
  return markLookup(renderNode(state, node, { peerSplitMin: Number.MAX_SAFE_INTEGER }).text);
}
