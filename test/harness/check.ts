// Probing one expected truth table and reporting the difference the way
// upstream prints it (expected, observed, comparison) plus the wrong probes.
import type { Family, Protocol } from '../../src/model/types.ts';
import { diffTables, formatReport } from '../support/truth-table.ts';
import type { Mismatch, TruthTable } from '../support/truth-table.ts';
import type { Cluster } from './cluster.ts';
import type { EnforceOptions } from './enforce.ts';
import { describeOutcome, probeMatrix, runProbes } from './probe.ts';
import type { Probe, ProbeOutcome } from './probe.ts';

export interface CheckResult {
  readonly title: string;
  readonly expected: TruthTable;
  readonly observed: TruthTable;
  readonly mismatches: readonly Mismatch[];
  readonly outcomes: readonly ProbeOutcome[];
  /** Upstream-style summary: counts, expected, observed, comparison; plus the wrong probes. */
  readonly report: string;
}

export interface RunOptions extends EnforceOptions {
  readonly family?: Family;
  readonly via?: 'service' | 'pod';
  readonly timeoutMs?: number;
}

/** Probes one expected table and reports the difference. */
export async function checkTable(
  c: Cluster,
  title: string,
  protocol: Protocol,
  port: number,
  expected: TruthTable,
  opts: RunOptions = {},
): Promise<CheckResult> {
  const { observed, outcomes } = await probeMatrix(c, {
    protocol,
    port,
    family: opts.family ?? 4,
    via: opts.via ?? 'service',
    froms: expected.froms,
    tos: expected.tos,
    expected,
    ...(opts.timeoutMs === undefined ? {} : { timeoutMs: opts.timeoutMs }),
  });
  const mismatches = diffTables(expected, observed);
  const wrong = outcomes.filter((o) => mismatches.some((m) => m.from === o.probe.from && m.to === o.probe.to));
  const report = [
    formatReport(expected, observed, { title }),
    ...(wrong.length === 0 ? [] : ['wrong probes:', ...wrong.map((o) => `  ${describeOutcome(o)}`)]),
  ].join('\n\n');
  return { title, expected, observed, mismatches, outcomes, report };
}

/** One failure message for all wrong tables (empty string: all good). */
export function failures(results: readonly CheckResult[]): string {
  return results
    .filter((r) => r.mismatches.length > 0)
    .map((r) => r.report)
    .join('\n\n');
}

export interface Expectation {
  readonly probe: Probe;
  readonly allowed: boolean;
  /** Why, for the failure message. */
  readonly why?: string;
}

/** Runs probes with known answers; returns one line per wrong probe (empty: all as expected). */
export async function checkProbes(
  c: Cluster,
  expectations: readonly Expectation[],
  opts: { timeoutMs?: number } = {},
): Promise<string[]> {
  const byProbe = new Map(expectations.map((e) => [e.probe, e]));
  const outcomes = await runProbes(
    c,
    expectations.map((e) => e.probe),
    { ...opts, expect: (r) => byProbe.get(r.probe)?.allowed },
  );
  return outcomes.flatMap((o) => {
    const e = byProbe.get(o.probe)!;
    if (o.connected === e.allowed) return [];
    const why = e.why === undefined ? '' : ` (${e.why})`;
    return [`expected ${e.allowed ? 'allowed' : 'blocked'}${why}: ${describeOutcome(o)}`];
  });
}
