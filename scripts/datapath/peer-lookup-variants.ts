// A prototype for measurement only (bench-datapath.ts --candidate
// candidate-peer-bits.ts): a way to keep the pod peer maps' addresses out of
// verdict map elements, whose `jump`s the kernel validates on every commit
// that adds one (docs/benchmarks.md, "The kernel's validation at 100k"). Text
// in, text out, on the project's rendered ruleset; nothing in src/ uses it.
//   bits    each <dir>-peers-vN map becomes a plain set of its addresses, one
//           plain set per bit of an identity index, and a binary tree of
//           chains that tests one bit per level down to the identity chain
// (The other prototype, the split of the biggest identities into plain sets,
// was built: compile/peer-split.ts.)

const PEER_MAP =
  /\tmap ((ingress|egress)-peers-(v4|v6)) \{\n\t\ttype (ipv4_addr|ipv6_addr) : verdict\n(?:\t\telements = \{([^}]*)\}\n)?\t\}\n/g;
const PEER_LOOKUP = /\t\t(ip6?) (saddr|daddr) vmap @((?:ingress|egress)-peers-(?:v4|v6))\n/g;

type Element = readonly [address: string, chain: string];

function elementsOf(body: string | undefined): Element[] {
  return [...(body ?? '').matchAll(/([0-9a-f.:]+) : jump ([A-Za-z0-9-]+)/g)].map((m) => [m[1]!, m[2]!] as const);
}

function plainSet(name: string, type: string, addresses: readonly string[]): string {
  const els = addresses.length > 0 ? `\t\telements = { ${addresses.join(', ')} }\n` : '';
  return `\tset ${name} {\n\t\ttype ${type}\n${els}\t}\n`;
}

function match(family: string, direction: string): string {
  return `${family === 'v4' ? 'ip' : 'ip6'} ${direction === 'ingress' ? 'saddr' : 'daddr'}`;
}

/** The bit tree, `depth` levels at least (more if the identities need them). */
export function peerMapsAsBits(text: string, depth: number): string {
  return text
    .replace(PEER_MAP, (_m, name: string, dir: string, fam: string, type: string, body: string | undefined) => {
      const els = elementsOf(body);
      const chains = [...new Set(els.map(([, c]) => c))].sort();
      const index = new Map(chains.map((c, i) => [c, i + 1]));
      const d = Math.max(depth, chains.length.toString(2).length);
      let out = plainSet(
        name,
        type,
        els.map(([a]) => a),
      );
      for (let b = 0; b < d; b++)
        out += plainSet(
          `${name}-b${b}`,
          type,
          els.filter(([, c]) => ((index.get(c) ?? 0) >> b) & 1).map(([a]) => a),
        );
      const tree = `${dir}-tree-${fam}`;
      const node = (path: string, level: number): void => {
        const chain = `${tree}-${path === '' ? 'r' : path}`;
        if (level < 0) {
          const target = chains[parseInt(path, 2) - 1];
          out += `\tchain ${chain} {\n\t\t${target === undefined ? 'return' : `goto ${target}`}\n\t}\n`;
          return;
        }
        out += `\tchain ${chain} {\n\t\t${match(fam, dir)} @${name}-b${level} goto ${tree}-${path}1\n\t\tgoto ${tree}-${path}0\n\t}\n`;
        node(`${path}1`, level - 1);
        node(`${path}0`, level - 1);
      };
      node('', d - 1);
      return out;
    })
    .replace(PEER_LOOKUP, (_m, ip: string, field: string, name: string) => {
      const [dir, , fam] = name.split('-');
      return `\t\t${ip} ${field} @${name} jump ${dir}-tree-${fam}-r\n`;
    });
}
