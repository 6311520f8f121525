// Scripts reach nft whole. nft commits whatever it has read when its input
// ends, and a pipe fed by the agent ends where the agent stopped: an agent
// killed mid-write (OOM, SIGKILL, a crash) would leave nft a prefix of the
// transaction, and a prefix cut at a line end is a valid, smaller transaction
// (measured with nft 1.0.6: `nft -f -` committed 2,284 of 40,000 elements;
// `nft -i` runs a last line without its newline). A cut at a token can be one
// too (`... counter` without its `drop`). A file is written completely before
// nft is started on it (its stdin) or told to read it (`include`), so a
// transaction is all there or never begun.
//
// The files live in /dev/shm: a tmpfs even under a read-only root filesystem
// (the DaemonSet's), private (0600, created exclusively under a random name)
// and removed as soon as nft has them. Where no such file can be written,
// callers fall back to the pipe; each such script is counted and a change of
// the problem reported (onPrivateFiles), for the agent's metric and log.
import { randomBytes } from 'node:crypto';
import { closeSync, existsSync, openSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

let dir = '/dev/shm';
let problem: string | undefined;
let failures = 0;

/** Told of each script no private file took, and when files work again. */
export interface PrivateFilesListener {
  /** A script that could not be written (its caller falls back); `problem` says why. */
  failed(problem: string): void;
  /** The first file written after failures. */
  recovered(): void;
}
let listener: PrivateFilesListener | undefined;

/** Sets (or with undefined clears) the one listener; returns the one before. */
export function onPrivateFiles(l: PrivateFilesListener | undefined): PrivateFilesListener | undefined {
  const before = listener;
  listener = l;
  return before;
}

/** How many scripts no private file took since the process started. */
export function privateFileFailures(): number {
  return failures;
}

function fail(why: string): void {
  problem = why;
  failures++;
  try {
    listener?.failed(why);
  } catch {
    // a listener's bug must not change what the caller does
  }
}

function wrote(): void {
  if (problem === undefined) return;
  problem = undefined;
  try {
    listener?.recovered();
  } catch {
    // as above
  }
}

/** For tests: the directory private files go to; returns the one before. */
export function usePrivateDir(d: string): string {
  const before = dir;
  dir = d;
  return before;
}

/** Why the last private file could not be written (undefined once one could). */
export function privateFilesProblem(): string | undefined {
  return problem;
}

// Synchronous on purpose: a tmpfs write of a few KiB is tens of microseconds
// on the event loop; the async calls cost +5-9 ms per apply under load at
// 100k pods (likely waiting in libuv's thread pool behind the read-back's
// deflate; docs/benchmarks.md).

/**
 * Writes `text` to a new private file; its path, or undefined when it could
 * not be written (nothing is left behind). The caller removes it. With
 * `includable`, only a path nft's `include` can quote (quotable) is written.
 */
export function writePrivateFile(kind: string, text: string, includable = false): string | undefined {
  // Only our own characters after the directory's.
  const path = join(dir, `nft-netpol-${kind}-${process.pid}-${randomBytes(6).toString('hex')}`);
  if (includable && !quotable(path)) {
    fail(`${dir}: not a path nft's include can quote`);
    return undefined;
  }
  try {
    writeFileSync(path, text, { mode: 0o600, flag: 'wx' });
    wrote();
    return path;
  } catch (e) {
    fail(`${dir}: ${e instanceof Error ? e.message : String(e)}`);
    removePrivateFile(path);
    return undefined;
  }
}

/**
 * `text` in a private file opened for reading (its descriptor), already
 * removed from its directory (the descriptor keeps it until closed): a
 * child's stdin that holds the whole text whatever happens to this process.
 * Undefined when it could not be written. The caller closes it (closeSync).
 */
export function privateInput(kind: string, text: string): number | undefined {
  const path = writePrivateFile(kind, text);
  if (path === undefined) return undefined;
  try {
    return openSync(path, 'r');
  } catch (e) {
    fail(`${path}: ${e instanceof Error ? e.message : String(e)}`);
    return undefined;
  } finally {
    removePrivateFile(path);
  }
}

/** Closes a descriptor from privateInput; never throws. */
export function closePrivateInput(fd: number): void {
  try {
    closeSync(fd);
  } catch {
    // already closed
  }
}

/** Removes a private file; never throws. */
export function removePrivateFile(path: string): void {
  try {
    rmSync(path, { force: true });
  } catch {
    // gone, or the directory is not ours to clean
  }
}

/** Is the include path of a private file safe to quote into nft syntax? */
export function quotable(path: string): boolean {
  return /^\/[A-Za-z0-9._/-]+$/.test(path);
}

/**
 * Removes the private files an earlier agent left (it died between writing
 * one and nft's answer): those of a process that is gone, and this pid's
 * own, which at start can only be an earlier container's (the agent is
 * often pid 1 in its pod, whose /dev/shm outlives container restarts). A
 * live process's files are left alone. The number removed; never throws.
 */
export function sweepPrivateFiles(): number {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return 0;
  }
  let removed = 0;
  for (const name of names) {
    const m = /^nft-netpol-[a-z]+-(\d+)-[0-9a-f]{12}$/.exec(name);
    if (m === null) continue;
    const pid = Number(m[1]);
    if (pid !== process.pid && existsSync(`/proc/${pid}`)) continue;
    removePrivateFile(join(dir, name));
    removed++;
  }
  return removed;
}
