// Network namespaces owned by this process: unique names, running commands
// inside them, and cleanup that also happens when a test fails, the process is
// interrupted, or an earlier run died (stale namespaces whose creator pid is gone).
import { spawnSync } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import { execa } from 'execa';

/** Every namespace this harness creates is named `nnpt-<creator pid>-<counter>-<role>`. */
export const NETNS_PREFIX = 'nnpt-';
const NAME_RE = /^nnpt-(\d+)-\d+-/;

let counter = 0;

/** A fresh name prefix for one cluster: unique per process and call, so two runs never collide. */
export function uniquePrefix(): string {
  counter += 1;
  return `${NETNS_PREFIX}${process.pid}-${counter}-`;
}

export interface CommandResult {
  readonly stdout: string;
  readonly stderr: string;
  readonly exitCode: number;
}

/** Runs a command; throws with stderr and the input's first lines on failure unless `reject: false`. */
export async function run(
  cmd: string,
  args: readonly string[],
  opts: { input?: string; reject?: boolean } = {},
): Promise<CommandResult> {
  const r = await execa(cmd, [...args], { input: opts.input ?? '', reject: false, stripFinalNewline: false });
  const res = { stdout: String(r.stdout), stderr: String(r.stderr), exitCode: r.exitCode ?? -1 };
  if (res.exitCode !== 0 && opts.reject !== false) {
    const input = opts.input === undefined ? '' : `\ninput:\n${opts.input.split('\n').slice(0, 40).join('\n')}`;
    throw new Error(`${cmd} ${args.join(' ')} exited ${res.exitCode}: ${res.stderr.trim()}${input}`);
  }
  return res;
}

/** Runs a command inside a network namespace (`ip netns exec`). */
export function runIn(
  netns: string,
  cmd: string,
  args: readonly string[],
  opts: { input?: string; reject?: boolean } = {},
): Promise<CommandResult> {
  return run('ip', ['netns', 'exec', netns, cmd, ...args], opts);
}

/** `ip -b -` (optionally `-n NS`): many ip commands in one process. */
export async function ipBatch(lines: readonly string[], netns?: string): Promise<void> {
  if (lines.length === 0) return;
  const args = netns === undefined ? ['-b', '-'] : ['-n', netns, '-b', '-'];
  await run('ip', args, { input: `${lines.join('\n')}\n` });
}

// ---- ownership and cleanup ----

const owned = new Set<string>();
const ownedPids = new Set<number>();
let handlersInstalled = false;

function listNetns(): string[] {
  try {
    return readdirSync('/run/netns');
  } catch {
    return [];
  }
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Kills the processes still inside a namespace of ours, then deletes it. Synchronous: usable from signal and exit handlers. */
function destroySync(name: string): void {
  const pids = spawnSync('ip', ['netns', 'pids', name], { encoding: 'utf8' }).stdout ?? '';
  for (const p of pids.split(/\s+/).filter(Boolean)) {
    try {
      process.kill(Number(p), 'SIGKILL');
    } catch {
      // already gone
    }
  }
  spawnSync('ip', ['netns', 'del', name], { stdio: 'ignore' });
}

function cleanupAllSync(): void {
  for (const pid of ownedPids) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  ownedPids.clear();
  for (const name of owned) destroySync(name);
  owned.clear();
}

function installHandlers(): void {
  if (handlersInstalled) return;
  handlersInstalled = true;
  process.on('exit', cleanupAllSync);
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.once(sig, () => {
      cleanupAllSync();
      // Re-raise with the default action so the exit status says what happened.
      process.kill(process.pid, sig);
    });
  }
}

/**
 * Deletes namespaces left by earlier runs of this harness whose creating
 * process is dead (SIGKILL, crash). Live runs are never touched. Returns the names removed.
 */
export function sweepStale(): string[] {
  const removed: string[] = [];
  for (const name of listNetns()) {
    const m = NAME_RE.exec(name);
    if (m === null) continue;
    const pid = Number(m[1]);
    if (pid === process.pid || pidAlive(pid)) continue;
    destroySync(name);
    removed.push(name);
  }
  return removed;
}

/** Creates namespaces (one `ip` process) and registers them for cleanup. */
export async function createNetns(names: readonly string[]): Promise<void> {
  installHandlers();
  for (const n of names) {
    if (!n.startsWith(NETNS_PREFIX)) throw new Error(`netns ${n}: harness namespaces must start with ${NETNS_PREFIX}`);
    owned.add(n);
  }
  await ipBatch(names.map((n) => `netns add ${n}`));
}

/** Deletes namespaces of ours (and anything still running inside them). */
export async function deleteNetns(names: readonly string[]): Promise<void> {
  for (const n of names) {
    const pids = (await run('ip', ['netns', 'pids', n], { reject: false })).stdout;
    for (const p of pids.split(/\s+/).filter(Boolean)) {
      try {
        process.kill(Number(p), 'SIGKILL');
      } catch {
        // already gone
      }
    }
  }
  const existing = new Set(listNetns());
  await ipBatch(names.filter((n) => existing.has(n)).map((n) => `netns del ${n}`));
  for (const n of names) owned.delete(n);
}

/** True once a process has exited (a zombie waiting for a reaper counts as exited). */
export function processGone(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Field 3, after the parenthesised command name.
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) === 'Z';
  } catch {
    return true;
  }
}

/** Processes of ours to kill on interruption (agents are also tied to our stdin, so they exit when we die). */
export function trackPid(pid: number): void {
  installHandlers();
  ownedPids.add(pid);
}

export function untrackPid(pid: number): void {
  ownedPids.delete(pid);
}

/** Namespaces of this harness currently present on the machine (for tests of the cleanup itself). */
export function harnessNetns(prefix = NETNS_PREFIX): string[] {
  return listNetns().filter((n) => n.startsWith(prefix));
}
