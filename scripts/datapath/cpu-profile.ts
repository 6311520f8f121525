// CPU accounting of one benchmark run with perf (software clock, whole
// machine): the CPU the run took, how much of it went to nftables'
// evaluation (nft_do_chain and the expressions and set lookups it calls),
// and the time of every function, so that two rulesets can be compared
// function by function. nftables' own functions do not show every cost a
// ruleset causes: a pipapo lookup's FPU save shows as
// save_fpregs_to_fpstate, and the restore on the way back to user space is
// sampled in the interrupted program (__libc_sendto).
import { execa } from 'execa';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** One sample per 100 us of CPU (cpu-clock counts nanoseconds). */
const PERIOD_NS = 100_000;
const IDLE = /^(pv_native_safe_halt|default_idle|acpi_idle_do_entry|intel_idle|poll_idle|mwait_idle|cpu_idle_poll)/;
/**
 * nftables' packet path only: the chain interpreter, expressions' eval and
 * the set backends' lookups (pipapo, rhash, rbtree, hash). Not the control
 * plane (nf_tables_*, element inserts, commits): perf samples the whole
 * machine, and other jobs loading rulesets meanwhile (2 MB ones take
 * seconds of CPU) otherwise showed as microseconds "per packet" even
 * between two identical baselines.
 */
const NFT =
  /^(nft_do_chain|nft_\w*_eval|nft_set_do_lookup|nft_set_catchall_lookup|nft_(hash|rhash|bitmap|rbtree|pipapo|pipapo_avx2)_lookup|nft_hash_lookup_fast|nft_array_lookup|nft_jhash|nft_rhash_(key|cmp)|pipapo_refill|nft_pipapo_avx2_refill|nft_update_chain_stats|nft_tcp_header_pointer|__nft_trace_)/;

export interface CpuUse {
  /** CPU time spent by anything but the idle loop, microseconds. */
  readonly busyUs: number;
  /** Of which in nftables' evaluation, microseconds. */
  readonly nftUs: number;
  /** nftables functions by time, microseconds, largest first. */
  readonly nftTop: readonly (readonly [string, number])[];
  /** Every non-idle function (kernel and user), microseconds. */
  readonly bySymbol: ReadonlyMap<string, number>;
}

export async function perfAvailable(): Promise<boolean> {
  const r = await execa('perf', ['record', '-q', '-a', '-e', 'cpu-clock', '-o', '/dev/null', '--', 'true'], {
    reject: false,
  });
  return r.exitCode === 0;
}

/** Runs `cmd args` inside `netns` under `perf record -a`; returns its stdout and the machine's CPU use meanwhile. */
export async function profiled(netns: string, cmd: string, args: readonly string[]): Promise<{ stdout: string; cpu: CpuUse }> {
  const dir = mkdtempSync(join(tmpdir(), 'bench-perf-'));
  const data = join(dir, 'perf.data');
  try {
    const r = await execa('perf', [
      'record',
      '-q',
      '-a',
      '-e',
      'cpu-clock',
      '-c',
      String(PERIOD_NS),
      '-o',
      data,
      '--',
      'ip',
      'netns',
      'exec',
      netns,
      cmd,
      ...args,
    ]);
    const rep = await execa('perf', ['report', '-i', data, '--stdio', '--no-children', '--sort', 'sym', '-g', 'none', '-n']);
    return { stdout: r.stdout, cpu: parseReport(rep.stdout) };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** `perf report -n --sort sym` lines: "  12.34%   1234  [k] symbol". */
export function parseReport(text: string): CpuUse {
  let busy = 0;
  let nft = 0;
  const top: [string, number][] = [];
  const bySymbol = new Map<string, number>();
  for (const line of text.split('\n')) {
    const m = /^\s+[\d.]+%\s+(\d+)\s+\[.\]\s+(\S+)/.exec(line);
    if (m === null) continue;
    const us = (Number(m[1]) * PERIOD_NS) / 1000;
    const sym = m[2] ?? '';
    if (IDLE.test(sym)) continue;
    busy += us;
    bySymbol.set(sym, (bySymbol.get(sym) ?? 0) + us);
    if (NFT.test(sym)) {
      nft += us;
      top.push([sym, us]);
    }
  }
  top.sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]));
  return { busyUs: busy, nftUs: nft, nftTop: top, bySymbol };
}

/**
 * Where a ruleset's extra CPU goes: per function, ns per unit under `rules`
 * minus under `base` (each the sum over its runs divided by its units),
 * largest differences first.
 */
export function symbolDelta(
  rules: readonly { cpu: CpuUse; units: number }[],
  base: readonly { cpu: CpuUse; units: number }[],
): [string, number][] {
  const perUnit = (runs: readonly { cpu: CpuUse; units: number }[]): Map<string, number> => {
    const units = runs.reduce((n, r) => n + r.units, 0);
    const out = new Map<string, number>();
    for (const r of runs) for (const [sym, us] of r.cpu.bySymbol) out.set(sym, (out.get(sym) ?? 0) + (us * 1000) / units);
    return out;
  };
  const a = perUnit(rules);
  const b = perUnit(base);
  const out: [string, number][] = [];
  for (const sym of new Set([...a.keys(), ...b.keys()])) out.push([sym, (a.get(sym) ?? 0) - (b.get(sym) ?? 0)]);
  return out.sort((x, y) => Math.abs(y[1]) - Math.abs(x[1]) || x[0].localeCompare(y[0]));
}
