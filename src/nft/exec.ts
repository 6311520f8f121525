// Runs nft. Arguments are always arrays and scripts go through stdin: no
// shell, nothing from the cluster ever reaches a command line. A script's
// stdin is a private file written before nft starts, not a pipe the agent
// feeds (nft/private-file.ts: why), unless no such file can be written.
import { execa } from 'execa';
import { closePrivateInput, privateInput } from './private-file.ts';

export type NftResult = { ok: true } | { ok: false; error: string; exitCode: number | undefined };

export interface NftTarget {
  /** Run inside this network namespace (`ip netns exec NAME ...`). */
  readonly netns?: string;
  readonly nftPath?: string;
}

// A hung nft must not hang the agent forever; a big ruleset loads in seconds.
const TIMEOUT_MS = 120_000;

function command(args: readonly string[], t: NftTarget | undefined): [string, string[]] {
  const nft = t?.nftPath ?? 'nft';
  if (t?.netns !== undefined) return ['ip', ['netns', 'exec', t.netns, nft, ...args]];
  return [nft, [...args]];
}

async function run(
  args: readonly string[],
  t: NftTarget | undefined,
  input?: string | { readonly fd: number },
  onSpawn?: (pid: number | undefined) => void,
) {
  const [file, argv] = command(args, t);
  // A lone descriptor goes to child_process untouched (the child inherits it);
  // execa's types name only 0 among numbers.
  const stdin = typeof input === 'object' ? { stdin: input.fd as 0 } : { input: input ?? '' };
  const sub = execa(file, argv, { ...stdin, reject: false, timeout: TIMEOUT_MS, stripFinalNewline: true });
  onSpawn?.(sub.pid);
  return sub;
}

function failure(r: { stderr: string; message?: string; timedOut: boolean }): string {
  const err = r.stderr.trim();
  if (r.timedOut) return `timed out after ${TIMEOUT_MS} ms${err === '' ? '' : `: ${err}`}`;
  // Without stderr (e.g. nft not installed) execa's message says what happened.
  return err === '' ? ((r.message ?? 'failed').trim().split('\n')[0] ?? 'failed') : err;
}

/** Applies (or with check: only validates) an `nft -f` script, fed on stdin (a private file's, else a pipe). */
export async function runNft(
  script: string,
  opts?: {
    check?: boolean;
    netns?: string;
    nftPath?: string;
    /** Told the pid of the nft process (`ip netns exec` execs nft in place: same pid). */
    onSpawn?: (pid: number | undefined) => void;
  },
): Promise<NftResult> {
  const args = opts?.check === true ? ['--check', '-f', '-'] : ['-f', '-'];
  const fd = privateInput('script', script);
  let sub: ReturnType<typeof run>;
  try {
    // run() spawns before it returns; the child then has its own descriptor of the file.
    sub = run(args, opts, fd === undefined ? script : { fd }, opts?.onSpawn);
  } finally {
    if (fd !== undefined) closePrivateInput(fd);
  }
  const r = await sub;
  if (!r.failed) return { ok: true };
  return { ok: false, error: failure(r), exitCode: r.exitCode };
}

/** `nft list table inet NAME`; undefined when the table does not exist. */
export async function listTable(table: string, opts?: { netns?: string; nftPath?: string }): Promise<string | undefined> {
  const r = await run(['list', 'table', 'inet', table], opts);
  if (!r.failed) return r.stdout;
  if (/No such file or directory/.test(r.stderr)) return undefined;
  throw new Error(`nft list table inet ${table}: ${failure(r)}`);
}

export type NftProbe = { ok: true; version: string } | { ok: false; reason: string };

/**
 * Can this process program nftables? Needs the nft binary and the rights to
 * talk to the kernel (root / CAP_NET_ADMIN); checked with a harmless --check.
 */
export async function probeNft(opts?: { nftPath?: string }): Promise<NftProbe> {
  const v = await run(['--version'], opts);
  if (v.failed) return { ok: false, reason: `nft is not runnable: ${failure(v)}` };
  const c = await runNft('table inet nft-netpol-probe {}\n', { check: true, ...opts });
  if (!c.ok) return { ok: false, reason: `nft cannot talk to the kernel (need root or CAP_NET_ADMIN): ${c.error}` };
  return { ok: true, version: v.stdout.trim() };
}
