// Truth tables as the upstream NetworkPolicy e2e suite writes them
// (test/e2e/network/netpol/truthtable.go, reachability.go): a from -> to map of
// booleans over pods named "ns/pod", built with ExpectPeer-style helpers from a
// default of "allowed", printed tab-separated with `.` = connected, `X` =
// blocked, `?` = unknown. Shared by the evaluator tests and the datapath harness.

/** `ns/pod` */
export type PodKey = string;

export interface TruthTable {
  readonly froms: readonly PodKey[];
  readonly tos: readonly PodKey[];
  /** values[from][to]; a missing cell is unknown (printed `?`). */
  readonly values: Readonly<Record<PodKey, Readonly<Record<PodKey, boolean>>>>;
}

/** Matches pods by namespace and/or name; an omitted field matches everything (upstream's Peer). */
export interface PeerMatch {
  readonly namespace?: string;
  readonly pod?: string;
}

function splitKey(k: PodKey): { namespace: string; pod: string } {
  const i = k.indexOf('/');
  return { namespace: k.slice(0, i), pod: k.slice(i + 1) };
}

function peerMatches(p: PeerMatch, k: PodKey): boolean {
  const s = splitKey(k);
  return (p.namespace === undefined || p.namespace === s.namespace) && (p.pod === undefined || p.pod === s.pod);
}

/** Upstream's Reachability.Expected: a mutable table with a default, then exceptions. */
export class Reachability {
  readonly pods: readonly PodKey[];
  readonly #values: Record<PodKey, Record<PodKey, boolean>> = {};

  constructor(pods: readonly PodKey[], defaultExpectation = true) {
    this.pods = [...pods];
    for (const f of pods) {
      const row: Record<PodKey, boolean> = {};
      for (const t of pods) row[t] = defaultExpectation;
      this.#values[f] = row;
    }
  }

  #row(from: PodKey): Record<PodKey, boolean> {
    const row = this.#values[from];
    if (row === undefined) throw new Error(`truth table: unknown pod ${from}`);
    return row;
  }

  expect(from: PodKey, to: PodKey, connected: boolean): this {
    const row = this.#row(from);
    if (!(to in row)) throw new Error(`truth table: unknown pod ${to}`);
    row[to] = connected;
    return this;
  }

  /** Everything going into `pod`. */
  expectAllIngress(pod: PodKey, connected: boolean): this {
    for (const f of this.pods) this.expect(f, pod, connected);
    return this;
  }

  /** Everything going out of `pod`. */
  expectAllEgress(pod: PodKey, connected: boolean): this {
    for (const t of this.pods) this.expect(pod, t, connected);
    return this;
  }

  expectPeer(from: PeerMatch, to: PeerMatch, connected: boolean): this {
    for (const f of this.pods) {
      if (!peerMatches(from, f)) continue;
      for (const t of this.pods) if (peerMatches(to, t)) this.expect(f, t, connected);
    }
    return this;
  }

  table(): TruthTable {
    const values: Record<PodKey, Record<PodKey, boolean>> = {};
    for (const [f, row] of Object.entries(this.#values)) values[f] = { ...row };
    return { froms: this.pods, tos: this.pods, values };
  }
}

/** A table over `pods` from a probe function; `undefined` results stay unknown. */
export function observeTable(pods: readonly PodKey[], probe: (from: PodKey, to: PodKey) => boolean | undefined): TruthTable {
  const values: Record<PodKey, Record<PodKey, boolean>> = {};
  for (const f of pods) {
    const row: Record<PodKey, boolean> = {};
    for (const t of pods) {
      const v = probe(f, t);
      if (v !== undefined) row[t] = v;
    }
    values[f] = row;
  }
  return { froms: [...pods], tos: [...pods], values };
}

export function cell(tt: TruthTable, from: PodKey, to: PodKey): boolean | undefined {
  return tt.values[from]?.[to];
}

/** Upstream's PrettyPrint: header `-\tx/a\tx/b...`, then one row per source. */
export function prettyPrint(tt: TruthTable, indent = ''): string {
  const lines = [indent + ['-', ...tt.tos].join('\t')];
  for (const f of tt.froms) {
    const marks = tt.tos.map((t) => {
      const v = cell(tt, f, t);
      return v === undefined ? '?' : v ? '.' : 'X';
    });
    lines.push(indent + [f, ...marks].join('\t'));
  }
  return lines.join('\n');
}

/**
 * For people (the demo): columns that line up whatever the pod names' length.
 * Destinations are numbered; a row's number is that pod's column.
 *
 *   from \ to            1  2
 *    1 shop/web          ?  .
 *    2 shop/db           X  ?
 */
export function alignedTable(tt: TruthTable, indent = ''): string {
  const num = (k: PodKey): string => String(tt.tos.indexOf(k) + 1);
  const numW = String(tt.tos.length).length;
  const nameW = Math.max('from \\ to'.length, ...tt.froms.map((f) => f.length));
  const colW = numW + 2;
  const rowHead = (n: string, name: string): string => `${indent}${n.padStart(numW)} ${name.padEnd(nameW)}`;
  const lines = [rowHead('', 'from \\ to') + tt.tos.map((_, i) => String(i + 1).padStart(colW)).join('')];
  for (const f of tt.froms) {
    const marks = tt.tos.map((t) => {
      const v = cell(tt, f, t);
      return (v === undefined ? '?' : v ? '.' : 'X').padStart(colW);
    });
    lines.push(rowHead(tt.tos.includes(f) ? num(f) : '', f) + marks.join(''));
  }
  const unnamed = tt.tos.filter((t) => !tt.froms.includes(t));
  if (unnamed.length > 0) lines.push(`${indent}to: ${unnamed.map((t) => `${num(t)} ${t}`).join(', ')}`);
  return lines.map((l) => l.trimEnd()).join('\n');
}

function sameAxes(a: TruthTable, b: TruthTable): void {
  const eq = (x: readonly string[], y: readonly string[]) => x.length === y.length && x.every((v, i) => v === y[i]);
  if (!eq(a.froms, b.froms) || !eq(a.tos, b.tos)) throw new Error('truth tables over different pods cannot be compared');
}

/** Upstream's Compare: true (`.`) where both agree, false (`X`) where they differ, unknown where either is. */
export function compareTables(expected: TruthTable, observed: TruthTable): TruthTable {
  sameAxes(expected, observed);
  return observeTable(expected.froms, (f, t) => {
    const e = cell(expected, f, t);
    const o = cell(observed, f, t);
    return e === undefined || o === undefined ? undefined : e === o;
  });
}

export interface Mismatch {
  readonly from: PodKey;
  readonly to: PodKey;
  readonly expected: boolean | undefined;
  readonly observed: boolean | undefined;
}

/**
 * Cells where the tables disagree (an unknown cell counts as a disagreement).
 * Self-probes are skipped by default, like upstream's ignoreLoopback (#95879).
 */
export function diffTables(expected: TruthTable, observed: TruthTable, opts: { ignoreLoopback?: boolean } = {}): Mismatch[] {
  sameAxes(expected, observed);
  const ignoreLoopback = opts.ignoreLoopback ?? true;
  const out: Mismatch[] = [];
  for (const from of expected.froms) {
    for (const to of expected.tos) {
      if (ignoreLoopback && from === to) continue;
      const e = cell(expected, from, to);
      const o = cell(observed, from, to);
      if (e === undefined || o === undefined || e !== o) out.push({ from, to, expected: e, observed: o });
    }
  }
  return out;
}

/** Upstream's PrintSummary: counts, then the expected, observed and comparison tables. */
export function formatReport(
  expected: TruthTable,
  observed: TruthTable,
  opts: { ignoreLoopback?: boolean; title?: string; layout?: 'upstream' | 'aligned' } = {},
): string {
  const ignoreLoopback = opts.ignoreLoopback ?? true;
  const wrong = diffTables(expected, observed, { ignoreLoopback }).length;
  const total = expected.froms.length * expected.tos.length;
  const ignored = ignoreLoopback ? expected.froms.filter((f) => expected.tos.includes(f)).length : 0;
  const head = opts.title === undefined ? '' : `${opts.title}\n`;
  if (opts.layout === 'aligned') {
    return [
      `${head}${total - ignored - wrong} correct, ${wrong} incorrect, ${ignored} not probed (a pod to itself)`,
      'legend: . connected   X blocked   ? not probed; a row is the source, a column the destination (numbered as the rows)',
      `expected (the evaluator):\n\n${alignedTable(expected, '  ')}`,
      `observed (real packets):\n\n${alignedTable(observed, '  ')}`,
      `comparison (. same, X different, ? not probed):\n\n${alignedTable(compareTables(expected, observed), '  ')}`,
    ].join('\n\n');
  }
  return [
    `${head}reachability: correct:${total - ignored - wrong}, incorrect:${wrong}, ignored:${ignored}, result=${wrong === 0}`,
    `expected:\n\n${prettyPrint(expected)}`,
    `observed:\n\n${prettyPrint(observed)}`,
    `comparison:\n\n${prettyPrint(compareTables(expected, observed))}`,
  ].join('\n\n');
}
