// CompiledRuleset -> an `nft -f` script. The script declares the table empty,
// deletes it and defines it anew: nft applies a file as one transaction, so
// the kernel switches from the old ruleset to the new one atomically and
// nothing outside our table is touched. This full script is also the
// recovery path of the incremental updates of nft/update.ts.
import { sanitizeComment } from '../ruleset/ids.ts';
import { addressText, elementText, keyText, portText } from './elements.ts';
import { resolveOptions } from '../ruleset/options.ts';
import { addressType, decisionBlocks, decisionColumns, decisionKeyType } from '../ruleset/ir.ts';
import type {
  Chain,
  CompiledRuleset,
  DecisionBlock,
  DecisionColumns,
  DecisionElement,
  DecisionMap,
  DecisionTail,
  DecisionVerdict,
  MapElement,
  Match,
  NamedLimit,
  NamedSet,
  Rule,
  Verdict,
  VerdictMap,
} from '../ruleset/ir.ts';

// Elements per line: keeps huge sets readable and lines short.
const PER_LINE = 8;

function fam(f: 4 | 6): 'ip' | 'ip6' {
  return f === 4 ? 'ip' : 'ip6';
}

function matchText(m: Match): string {
  switch (m.kind) {
    case 'ctState':
      return `ct state ${m.states.join(',')}`;
    case 'icmpv6Types':
      return `icmpv6 type { ${m.types.join(', ')} }`;
    case 'l4proto':
      return `meta l4proto ${m.proto}`;
    case 'l4port':
      return `meta l4proto ${m.proto} th dport ${portText(m.port)}`;
    case 'addrSet':
      return `${fam(m.family)} ${m.field} @${m.set}`;
    case 'portSet':
      return `meta l4proto . th dport @${m.set}`;
    case 'namedPortSet':
      return `${fam(m.family)} daddr . meta l4proto . th dport @${m.set}`;
    case 'localPortSet':
      return `${fam(m.family)} ${m.field} . meta l4proto . th dport @${m.set}`;
    case 'fibLocal':
      return `fib ${m.field} type ${m.local ? '' : '!= '}local`;
    case 'limit':
      return `limit name ${quoted(m.name)}`;
  }
}

function verdictText(v: Verdict): string {
  switch (v.kind) {
    case 'accept':
    case 'drop':
      return v.kind;
    case 'reject':
      return v.with === 'tcp reset' ? 'reject with tcp reset' : 'reject with icmpx type port-unreachable';
    case 'jump':
      return `jump ${v.chain}`;
    case 'goto':
      return `goto ${v.chain}`;
    case 'vmap':
      return `${fam(v.family)} ${v.field} vmap @${v.map}`;
    case 'decisionVmap':
      return decisionLookupText(v);
    case 'return':
      return 'return';
    case 'log':
      return `log prefix ${quoted(v.prefix)} group ${v.group} snaplen ${v.snaplen}`;
  }
}

/** The key a decision map is looked up with, then `vmap @map`. */
function decisionLookupText(v: Extract<Verdict, { kind: 'decisionVmap' }>): string {
  switch (v.key) {
    case 'port':
      return `${fam(v.family)} ${v.field} . meta l4proto . th dport vmap @${v.map}`;
    case 'proto':
      return `${fam(v.family)} ${v.field} . meta l4proto vmap @${v.map}`;
    case 'addr':
    case 'peer':
      return `${fam(v.family)} ${v.field} vmap @${v.map}`;
    case 'l4port':
      return `meta l4proto . th dport vmap @${v.map}`;
    case 'l4proto':
      return `meta l4proto vmap @${v.map}`;
  }
}

// nft strings have no escapes: sanitize again here (idempotent), so even a
// hand-built IR cannot break out of the quotes.
export function quoted(text: string): string {
  return `"${sanitizeComment(text)}"`;
}

function comment(text: string | undefined): string {
  return text === undefined ? '' : ` comment ${quoted(text)}`;
}

export function ruleText(r: Rule): string {
  const parts = r.matches.map(matchText);
  if (r.counter) parts.push('counter');
  parts.push(verdictText(r.verdict));
  return parts.join(' ') + comment(r.comment);
}

/** `{ a, b, ... }`, PER_LINE elements a line, continuation lines indented by `indent`. */
export function elementList(elements: readonly string[], indent: string): string {
  // One pass, no array per line: the tiers' decision maps list tens of thousands.
  const lineBreak = `,\n${indent}`;
  let text = '{ ';
  for (let i = 0; i < elements.length; i++) {
    if (i > 0) text += i % PER_LINE === 0 ? lineBreak : ', ';
    text += elements[i];
  }
  return `${text} }`;
}

function elementsBlock(out: string[], elements: readonly string[]): void {
  if (elements.length === 0) return; // nft rejects `elements = { }`
  out.push(`\t\telements = ${elementList(elements, '\t\t\t     ')}`);
}

/**
 * Dispatch: `10.0.0.1 : goto KUBE-POD-FW-…`, or `10.0.0.1 : accept` for a
 * known pod nothing isolates. Peers: `10.0.0.1 : jump KUBE-PEERS-…` (a jump
 * returns to the pod chain, whose next rules and deny tail still apply).
 */
export function mapElementText(m: VerdictMap, e: MapElement): string {
  const key = addressText(e.key);
  if (e.chain === undefined) return `${key} : accept`;
  return `${key} : ${m.kind === 'peers' ? 'jump' : 'goto'} ${e.chain}`;
}

/** `10.0.0.5 . tcp . 80 : goto KUBE-NWPLCY-…`, `10.0.0.5 . tcp : return`. */
export function decisionElementText(e: DecisionElement): string {
  const note = e.comment === undefined ? '' : ` comment ${quoted(e.comment)}`;
  return `${keyText(e.key)}${note} : ${e.verdict.kind === 'goto' ? `goto ${e.verdict.chain}` : 'return'}`;
}

/** What follows the address in a block's elements (decisionElementText's text: keyText, then the verdict). */
function tailText(t: DecisionTail): string {
  const key = t.proto === undefined ? '' : t.port === undefined ? ` . ${t.proto}` : ` . ${t.proto} . ${portText(t.port)}`;
  return `${key} : ${t.verdict.kind === 'goto' ? `goto ${t.verdict.chain}` : 'return'}`;
}

/** Every element of a decision map as text, in order; a block map's straight from its blocks (ruleset/ir.ts). */
export function decisionElementTexts(m: DecisionMap): string[] {
  const columns = decisionColumns(m);
  if (columns !== undefined) {
    const tail = tailTexts();
    return columns.addrs.map((addr, i) => addr + tail(columns.verdicts[i]!));
  }
  const blocks = decisionBlocks(m);
  if (blocks === undefined) return m.elements.map(decisionElementText);
  const out: string[] = [];
  for (const b of blocks) {
    const tails = b.tails.map(tailText);
    for (const addr of b.addrs) for (const tail of tails) out.push(addr + tail);
  }
  return out;
}

/**
 * elementsBlock(out, decisionElementTexts(m)) of a block map, as one join of
 * its parts: no string per element. The shared tier layout's maps hold tens
 * of thousands, all alive until the text is joined, so a young-generation GC
 * during render copied each of them (and their concatenations).
 */
function blockElementsBlock(out: string[], blocks: readonly DecisionBlock[]): void {
  const lineBreak = ',\n\t\t\t     ';
  const parts: string[] = ['\t\telements = { '];
  let i = 0;
  for (const b of blocks) {
    if (b.addrs.length === 0) continue;
    const tails = b.tails.map(tailText);
    for (const addr of b.addrs)
      for (const tail of tails) {
        if (i > 0) parts.push(i % PER_LINE === 0 ? lineBreak : ', ');
        parts.push(addr, tail);
        i++;
      }
  }
  if (i === 0) return; // nft rejects `elements = { }`
  parts.push(' }');
  out.push(parts.join(''));
}

/** A verdict's tail text (` : goto ...`), once per verdict object: a column map's verdicts are shared by many addresses. */
function tailTexts(): (v: DecisionVerdict) => string {
  const memo = new Map<DecisionVerdict, string>();
  return (v) => {
    let text = memo.get(v);
    if (text === undefined) memo.set(v, (text = tailText({ proto: undefined, port: undefined, verdict: v })));
    return text;
  };
}

/** blockElementsBlock of a column map (ruleset/ir.ts DecisionColumns): the same text as its elements'. */
function columnElementsBlock(out: string[], columns: DecisionColumns): void {
  const { addrs, verdicts } = columns;
  if (addrs.length === 0) return; // nft rejects `elements = { }`
  const lineBreak = ',\n\t\t\t     ';
  const tail = tailTexts();
  const parts: string[] = ['\t\telements = { '];
  for (let i = 0; i < addrs.length; i++) {
    if (i > 0) parts.push(i % PER_LINE === 0 ? lineBreak : ', ');
    parts.push(addrs[i]!, tail(verdicts[i]!));
  }
  parts.push(' }');
  out.push(parts.join(''));
}

/** A decision map's declaration on one line (`add map ... { this }`); equal text, equal declaration. */
export function decisionDeclaration(m: DecisionMap): string {
  return [
    `type ${decisionKeyType(m.family, m.key)} : verdict;`,
    ...(m.interval ? ['flags interval;'] : []),
    ...(m.comment === undefined ? [] : [`comment ${quoted(m.comment)};`]),
  ].join(' ');
}

function renderDecisionMap(out: string[], m: DecisionMap): void {
  out.push(`\tmap ${m.name} {`, `\t\ttype ${decisionKeyType(m.family, m.key)} : verdict`);
  if (m.interval) out.push('\t\tflags interval');
  if (m.comment !== undefined) out.push(`\t\tcomment ${quoted(m.comment)}`);
  const blocks = decisionBlocks(m);
  const columns = decisionColumns(m);
  if (columns !== undefined) columnElementsBlock(out, columns);
  else if (blocks === undefined) elementsBlock(out, m.elements.map(decisionElementText));
  else blockElementsBlock(out, blocks);
  out.push('\t}', '');
}

/** A map's declaration on one line; equal text, equal declaration. */
export function mapDeclaration(m: VerdictMap): string {
  return `type ${addressType(m.family)} : verdict;${m.interval ? ' flags interval;' : ''}`;
}

/** A set's declaration on one line (`add set ... { this }`); equal text, equal declaration. */
export function setDeclaration(s: NamedSet): string {
  return [
    `type ${s.type};`,
    ...(s.interval ? ['flags interval;'] : []),
    ...(s.comment === undefined ? [] : [`comment ${quoted(s.comment)};`]),
  ].join(' ');
}

function renderSet(out: string[], s: NamedSet): void {
  out.push(`\tset ${s.name} {`, `\t\ttype ${s.type}`);
  if (s.interval) out.push('\t\tflags interval');
  if (s.comment !== undefined) out.push(`\t\tcomment ${quoted(s.comment)}`);
  elementsBlock(out, s.elements.map(elementText));
  out.push('\t}', '');
}

function renderMap(out: string[], m: VerdictMap): void {
  out.push(`\tmap ${m.name} {`, `\t\ttype ${addressType(m.family)} : verdict`);
  if (m.interval) out.push('\t\tflags interval');
  elementsBlock(
    out,
    m.elements.map((e) => mapElementText(m, e)),
  );
  out.push('\t}', '');
}

/** `limit NAME { rate R/second burst B packets }` (listed the same way by nft). */
export function limitDeclaration(l: NamedLimit): string {
  return `rate ${l.ratePerSecond}/second burst ${l.burst} packets`;
}

function renderLimit(out: string[], l: NamedLimit): void {
  out.push(`\tlimit ${l.name} {`, `\t\t${limitDeclaration(l)}`, '\t}', '');
}

/**
 * Chains' lines. An identity chain's rule and comment lines seen before in
 * the same script are reused: the tiers' identity chains of many classes
 * share their rules and comments (thousands of chains at 100k pods).
 */
function chainRenderer(): (out: string[], c: Chain) => void {
  const ruleLines = new Map<Rule, string>();
  const commentLines = new Map<string, string>();
  return (out, c) => {
    out.push(`\tchain ${c.name} {`);
    if (c.base !== undefined) {
      const prio =
        c.base.priority === 0 ? 'filter' : c.base.priority > 0 ? `filter + ${c.base.priority}` : `filter - ${-c.base.priority}`;
      out.push(`\t\ttype filter hook ${c.base.hook} priority ${prio}; policy accept;`);
    }
    if (c.comment !== undefined && c.role === 'peers') {
      // Identity chains: one comment text per identity, met again per class (other chains' comments are their own).
      let line = commentLines.get(c.comment);
      if (line === undefined) commentLines.set(c.comment, (line = `\t\tcomment ${quoted(c.comment)}`));
      out.push(line);
    } else if (c.comment !== undefined) out.push(`\t\tcomment ${quoted(c.comment)}`);
    if (c.role !== 'peers') for (let i = 0; i < c.rules.length; i++) out.push(`\t\t${ruleText(c.rules[i]!)}`);
    else
      for (let i = 0; i < c.rules.length; i++) {
        const r = c.rules[i]!;
        let line = ruleLines.get(r);
        if (line === undefined) ruleLines.set(r, (line = `\t\t${ruleText(r)}`));
        out.push(line);
      }
    out.push('\t}', '');
  };
}

/** The lines of each object of the script, in the order nft needs them (one home for it). */
function* objectLines(c: CompiledRuleset): Generator<string[]> {
  const t = c.table;
  yield [
    // The node name is the only raw input in this line; a newline in it must not start a statement.
    `# nft-netpol-agent ruleset for node ${c.node.replace(/[^A-Za-z0-9._-]/g, '_')}`,
    // Declaring first makes the delete valid when the table does not exist yet.
    `table inet ${t} {}`,
    `delete table inet ${t}`,
    `table inet ${t} {`,
    `\tcomment ${quoted(c.comment)}`,
    '',
  ];
  const one = <T>(render: (out: string[], x: T) => void, x: T): string[] => {
    const out: string[] = [];
    render(out, x);
    return out;
  };
  // Referenced objects come before their users: limits, sets, (staged
  // tallies, their maps and lookups), policy
  // chains, tier rule chains, decision maps (goto rule chains), peer chains
  // (vmap on decision maps), peer maps and a class's peer decision maps
  // (jump or goto peer chains), lookup
  // chains (vmap on peer maps), pod chains (jump to a lookup chain), dispatch
  // maps (goto pod chains), base chains.
  const renderChain = chainRenderer();
  for (const l of c.limits) yield one(renderLimit, l);
  for (const s of c.sets) yield one(renderSet, s);
  const byRole = (role: Chain['role']): Chain[] => c.chains.filter((ch) => ch.role === role);
  // The staged shadow path's tallies (compile/staged.ts): referenced by every other kind of chain.
  for (const ch of byRole('tally')) yield one(renderChain, ch);
  for (const m of c.maps) if (m.kind === 'tally') yield one(renderMap, m);
  for (const ch of byRole('tally-lookup')) yield one(renderChain, ch);
  for (const ch of byRole('policy')) yield one(renderChain, ch);
  for (const ch of byRole('rule')) yield one(renderChain, ch);
  for (const m of c.decisions) if (m.key !== 'peer') yield one(renderDecisionMap, m);
  for (const ch of byRole('peers')) yield one(renderChain, ch);
  for (const m of c.decisions) if (m.key === 'peer') yield one(renderDecisionMap, m);
  for (const m of c.maps) if (m.kind === 'peers' || m.kind === 'tier-peers') yield one(renderMap, m);
  for (const ch of byRole('lookup')) yield one(renderChain, ch);
  for (const ch of byRole('pod')) yield one(renderChain, ch);
  for (const m of c.maps) if (m.kind === 'dispatch') yield one(renderMap, m);
  for (const ch of byRole('base')) yield one(renderChain, ch);
}

/** The script's lines in groups: every object's, then the closing brace (the last blank line dropped before it). */
function* scriptLines(c: CompiledRuleset): Generator<string[]> {
  let prev: string[] | undefined;
  for (const g of objectLines(c)) {
    if (g.length === 0) continue;
    if (prev !== undefined) yield prev;
    prev = g;
  }
  if (prev !== undefined) {
    if (prev[prev.length - 1] === '') prev.pop();
    yield prev;
  }
  yield ['}', ''];
}

export function renderRuleset(c: CompiledRuleset): string {
  const out: string[] = [];
  for (const g of scriptLines(c)) for (let i = 0; i < g.length; i++) out.push(g[i]!);
  return out.join('\n');
}

/**
 * The script in pieces, object by object: their concatenation is
 * renderRuleset(c). For work that may pause between pieces (the status's
 * ruleset hash, hashed in slices instead of rendering ~2 MB at once).
 */
export function* rulesetPieces(c: CompiledRuleset): Generator<string> {
  let first = true;
  for (const g of scriptLines(c)) {
    const text = g.join('\n');
    yield first ? text : `\n${text}`;
    first = false;
  }
}

/** Deletes our table if present, in one transaction; touches nothing else. */
export function renderCleanup(table: string): string {
  const t = resolveOptions({ table }).table;
  return `table inet ${t} {}\ndelete table inet ${t}\n`;
}
