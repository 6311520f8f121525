// The real dataplane: nft transactions and listings through nft/exec.ts, and
// the optional conntrack cleanup of released pod IPs. Arguments are arrays,
// scripts go on stdin or in private files: nothing from the cluster reaches a
// command line except validated IP addresses.
import { execa } from 'execa';
import { setPriority } from 'node:os';
import { parseIP, formatIP } from '../model/ip.ts';
import { listTable } from '../nft/exec.ts';
import { NftSession, runScript, type SessionOptions } from '../nft/session.ts';
import { removePrivateFile, writePrivateFile } from '../nft/private-file.ts';
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

/**
 * The niceness of the counters listing: it runs beside the applies, outside
 * their queue, and nft 1.0.6 fetches every set element even for a terse
 * listing (0.3 s of CPU at 100k pods), so it yields the CPU to them.
 */
export const COUNTERS_LISTING_NICE = 19;

/** Lowers a child's priority; one already gone (or a refusal) leaves it as it is. */
function lowerPriority(pid: number | undefined, nice: number): void {
  if (pid === undefined || nice <= 0) return;
  try {
    setPriority(pid, nice);
  } catch {
    // exited already, or not permitted: it runs at the agent's priority
  }
}

// Terse (-t): sets and maps printed without their elements (nft still
// fetches them: the CPU cost follows the cluster, the output does not).
async function listTerseJson(t: DataplaneTarget, nice: number): Promise<string | undefined> {
  const [file, args] = inNetns(t.netns, t.nftPath, ['-t', '-j', 'list', 'table', 'inet', t.table]);
  const sub = execa(file, args, { reject: false, timeout: 30_000, stripFinalNewline: true });
  lowerPriority(sub.pid, nice);
  const r = await sub;
  if (!r.failed) return r.stdout;
  if (/No such file or directory/.test(r.stderr)) return undefined;
  throw new Error(`nft -t -j list table inet ${t.table}: ${r.stderr.trim() || r.message}`);
}

export function nftDataplane(
  t: DataplaneTarget,
  opts?: {
    readonly session?: boolean;
    readonly onSession?: SessionOptions['onEvent'];
    /** The counters listing's niceness (default COUNTERS_LISTING_NICE; 0: the agent's). */
    readonly countersNice?: number;
  },
): Dataplane {
  const where = { nftPath: t.nftPath, ...(t.netns === undefined ? {} : { netns: t.netns }) };
  const session =
    opts?.session === false ? undefined : new NftSession(where, opts?.onSession === undefined ? {} : { onEvent: opts.onSession });
  return {
    // Marked so that the table monitor knows our deletions from anyone else's.
    apply: (script) => runScript(session, markTransaction(script, t.table), where),
    close: () => session?.close(),
    list: (signal) => (signal === undefined ? listTable(t.table, where) : listCancellable(t, signal)),
    listCounters: () => listTerseJson(t, opts?.countersNice ?? COUNTERS_LISTING_NICE),
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
 * One `conntrack -R FILE` (conntrack-tools 1.4.6+) runs every deletion: one
 * process per apply instead of two per released IP, each of which cost the
 * agent a fork on its event loop (~5-9 ms at 100-280 MiB RSS). conntrack
 * opens the file by name, and Node's stdin pipes are sockets, which
 * /dev/stdin cannot reopen: so the commands (validated addresses only) go
 * to a private file (nft/private-file.ts: /dev/shm, a tmpfs even under a
 * read-only root filesystem), removed at once. Without it, or with an older
 * conntrack, the commands run one by one, where exit code 1 means nothing
 * matched.
 */
export async function deleteConntrack(
  netns: string | undefined,
  ips: readonly string[],
): Promise<{ commands: number; batched: boolean; failed: string[] }> {
  const commands: string[][] = [];
  for (const raw of ips) {
    const ip = parseIP(raw);
    if (ip === undefined) continue;
    const addr = formatIP(ip);
    const fam = ip.family === 4 ? 'ipv4' : 'ipv6';
    for (const dir of ['--orig-src', '--orig-dst']) commands.push(['-D', '-f', fam, dir, addr]);
  }
  if (commands.length === 0) return { commands: 0, batched: false, failed: [] };
  // One IP is already two commands: one process for both (a fork of the agent each, 5-9 ms at 100k pods).
  const batch = await conntrackBatch(netns, commands);
  if (batch === 'ok') return { commands: commands.length, batched: true, failed: [] };
  return { commands: commands.length, batched: false, failed: await conntrackEach(netns, commands) };
}

/** The commands one process each (when a batch failed): what failed, by address. */
export async function conntrackEach(netns: string | undefined, commands: readonly (readonly string[])[]): Promise<string[]> {
  const failed: string[] = [];
  for (const c of commands) {
    const [f, a] = inNetns(netns, 'conntrack', [...c]);
    const r = await execa(f, a, { reject: false, timeout: 10_000 });
    if (r.exitCode !== 0 && r.exitCode !== 1) failed.push(`${c.at(-1) ?? ''}: ${r.stderr.trim() || r.message}`);
  }
  return failed;
}

async function conntrackBatch(netns: string | undefined, commands: readonly string[][]): Promise<'ok' | 'failed'> {
  const path = writePrivateFile('conntrack', commands.map((c) => `${c.join(' ')}\n`).join(''));
  if (path === undefined) return 'failed';
  try {
    const [file, args] = inNetns(netns, 'conntrack', ['-R', path]);
    const r = await execa(file, args, { reject: false, timeout: 30_000 });
    return r.exitCode === 0 ? 'ok' : 'failed';
  } finally {
    removePrivateFile(path);
  }
}
