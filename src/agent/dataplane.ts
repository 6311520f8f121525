// The real dataplane: nft transactions and listings through nft/exec.ts, and
// the optional conntrack cleanup of released pod IPs. Arguments are arrays,
// scripts go on stdin: nothing from the cluster reaches a command line except
// validated IP addresses.
import { execa } from 'execa';
import { parseIP, formatIP } from '../model/ip.ts';
import { listTable } from '../nft/exec.ts';
import { NftSession, runScript, type SessionOptions } from '../nft/session.ts';
import type { Dataplane } from './ports.ts';
import { markTransaction } from './table-monitor.ts';

export interface DataplaneTarget {
  readonly table: string;
  readonly nftPath: string;
  readonly netns: string | undefined;
}

function inNetns(netns: string | undefined, file: string, args: string[]): [string, string[]] {
  return netns === undefined ? [file, args] : ['ip', ['netns', 'exec', netns, file, ...args]];
}

// Like nft/exec.ts listTable, plus cancellation: the read-back after an apply
// is given up when a newer change is waiting (at 100k pods it takes ~0.5 s).
async function listCancellable(t: DataplaneTarget, signal: AbortSignal): Promise<string | undefined> {
  const [file, args] = inNetns(t.netns, t.nftPath, ['list', 'table', 'inet', t.table]);
  const r = await execa(file, args, { reject: false, timeout: 120_000, cancelSignal: signal, stripFinalNewline: true });
  if (r.isCanceled) throw new DOMException('listing cancelled', 'AbortError');
  if (!r.failed) return r.stdout;
  if (/No such file or directory/.test(r.stderr)) return undefined;
  throw new Error(`nft list table inet ${t.table}: ${r.stderr.trim() || r.message}`);
}

// Terse (-t): sets and maps without their elements, so the cost follows the
// local pods and policies, not the number of pods in the cluster.
async function listTerseJson(t: DataplaneTarget): Promise<string | undefined> {
  const [file, args] = inNetns(t.netns, t.nftPath, ['-t', '-j', 'list', 'table', 'inet', t.table]);
  const r = await execa(file, args, { reject: false, timeout: 30_000, stripFinalNewline: true });
  if (!r.failed) return r.stdout;
  if (/No such file or directory/.test(r.stderr)) return undefined;
  throw new Error(`nft -t -j list table inet ${t.table}: ${r.stderr.trim() || r.message}`);
}

export function nftDataplane(
  t: DataplaneTarget,
  opts?: { readonly session?: boolean; readonly onSession?: SessionOptions['onEvent'] },
): Dataplane {
  const where = { nftPath: t.nftPath, ...(t.netns === undefined ? {} : { netns: t.netns }) };
  const session =
    opts?.session === false ? undefined : new NftSession(where, opts?.onSession === undefined ? {} : { onEvent: opts.onSession });
  return {
    // Marked so that the table monitor knows our deletions from anyone else's.
    apply: (script) => runScript(session, markTransaction(script, t.table), where),
    close: () => session?.close(),
    list: (signal) => (signal === undefined ? listTable(t.table, where) : listCancellable(t, signal)),
    listCounters: () => listTerseJson(t),
    marked: true,
  };
}

/** Is the conntrack tool (Debian package `conntrack`) runnable here? */
export async function conntrackAvailable(netns: string | undefined): Promise<boolean> {
  const [file, args] = inNetns(netns, 'conntrack', ['--version']);
  const r = await execa(file, args, { reject: false, timeout: 10_000 });
  return !r.failed;
}

/**
 * Deletes the conntrack entries to and from each IP, so that flows a removed
 * pod had established lose their allowance together with its set elements.
 * conntrack exits 1 when nothing matched: that is not an error here.
 */
export async function deleteConntrack(
  netns: string | undefined,
  ips: readonly string[],
): Promise<{ deleted: number; failed: string[] }> {
  const failed: string[] = [];
  let deleted = 0;
  for (const raw of ips) {
    const ip = parseIP(raw);
    if (ip === undefined) continue;
    const addr = formatIP(ip);
    const fam = ip.family === 4 ? 'ipv4' : 'ipv6';
    for (const dir of ['--orig-src', '--orig-dst']) {
      const [file, args] = inNetns(netns, 'conntrack', ['-D', '-f', fam, dir, addr]);
      const r = await execa(file, args, { reject: false, timeout: 10_000 });
      if (r.exitCode === 0) deleted++;
      else if (r.exitCode !== 1) failed.push(`${addr}: ${r.stderr.trim() || r.message}`);
    }
  }
  return { deleted, failed };
}
