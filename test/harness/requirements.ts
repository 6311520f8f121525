// What the datapath tests need from the machine: root, ip (iproute2), nft,
// python3 (SCTP sender), and the right to create network namespaces. Missing
// requirements skip the tests with a clear message locally, and fail them in
// CI (process.env.CI === 'true'), where a silent skip would hide the suite.
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';
import type { TestContext } from 'node:test';

function runs(cmd: string, args: readonly string[]): string | undefined {
  const r = spawnSync(cmd, [...args], { encoding: 'utf8' });
  if (r.error !== undefined) return `${cmd} is not installed (${r.error.message})`;
  if (r.status !== 0) return `\`${cmd} ${args.join(' ')}\` failed: ${(r.stderr || r.stdout).trim()}`;
  return undefined;
}

let cached: string[] | undefined;

/** Human-readable reasons the datapath tests cannot run here; empty when they can. */
export function missingRequirements(): string[] {
  if (cached !== undefined) return cached;
  const missing: string[] = [];
  if (process.platform !== 'linux') missing.push(`Linux is required (this is ${process.platform})`);
  else if (process.getuid?.() !== 0)
    missing.push('root is required (network namespaces, nftables): run the datapath tests with sudo');
  else {
    for (const [cmd, args, pkg] of [
      ['ip', ['-V'], 'iproute2'],
      ['nft', ['--version'], 'nftables'],
      [process.env.HARNESS_PYTHON ?? 'python3', ['-c', 'import socket, json, struct'], 'python3'],
    ] as const) {
      const why = runs(cmd, args);
      if (why !== undefined) missing.push(`${why} (Debian package ${pkg})`);
    }
    if (missing.length === 0) {
      // Creating and deleting a namespace proves the rights (containers may lack CAP_SYS_ADMIN).
      const name = `nnpt-${process.pid}-0-reqcheck`;
      const why = runs('ip', ['netns', 'add', name]);
      if (why !== undefined) missing.push(`cannot create network namespaces: ${why}`);
      else spawnSync('ip', ['netns', 'del', name]);
    }
  }
  cached = missing;
  return missing;
}

export const IN_CI = process.env.CI === 'true';

/**
 * The `skip` option for datapath tests: a message when requirements are
 * missing outside CI, false otherwise. In CI, missing requirements register a
 * failing test instead (once per file).
 */
export function datapathSkip(): string | false {
  const missing = missingRequirements();
  if (missing.length === 0) return false;
  const message = `datapath tests need: ${missing.join('; ')}`;
  if (IN_CI) {
    if (!reported) {
      reported = true;
      test('datapath requirements (CI must run the datapath suite)', () => {
        throw new Error(`${message}. CI=true: refusing to skip.`);
      });
    }
    // The failing test above reports it; the real tests are skipped, not run half-broken.
    return message;
  }
  return message;
}
let reported = false;

/** Inside a test: skip (locally) or fail (CI) when requirements are missing. */
export function requireDatapath(t: TestContext): boolean {
  const missing = missingRequirements();
  if (missing.length === 0) return true;
  const message = `datapath tests need: ${missing.join('; ')}`;
  if (IN_CI) throw new Error(`${message}. CI=true: refusing to skip.`);
  t.skip(message);
  return false;
}
