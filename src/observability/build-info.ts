// What this build is: the package version, the git commit it was built from
// and the Node.js that runs it. For `--version`, the agent's start line and
// nftnp_build_info. The commit comes from the image (the Dockerfile sets
// NFTNP_COMMIT from its REVISION build argument), else from git when running
// from a checkout, else "unknown".
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';

export interface BuildInfo {
  readonly version: string;
  readonly commit: string;
  /** The Node.js version, e.g. v24.21.0. */
  readonly nodejs: string;
}

// src/observability/ and dist/observability/ are both two levels below the package root.
const ROOT = new URL('../../', import.meta.url);
const COMMIT = /^[0-9a-f]{7,40}(-dirty)?$/;

function packageVersion(): string {
  try {
    const pkg = JSON.parse(readFileSync(new URL('package.json', ROOT), 'utf8')) as { version?: unknown };
    return typeof pkg.version === 'string' ? pkg.version : 'unknown';
  } catch {
    return 'unknown';
  }
}

async function gitCommit(): Promise<string | undefined> {
  const root = fileURLToPath(ROOT);
  if (!existsSync(new URL('.git', ROOT))) return undefined;
  try {
    const r = await execa('git', ['-C', root, 'rev-parse', 'HEAD'], { timeout: 5000, reject: false, stdin: 'ignore' });
    const out = r.exitCode === 0 ? String(r.stdout).trim() : '';
    return COMMIT.test(out) ? out : undefined;
  } catch {
    return undefined;
  }
}

let cached: Promise<BuildInfo> | undefined;

/** The build's identity; `env` is read for NFTNP_COMMIT (set in the image). */
export function buildInfo(env: NodeJS.ProcessEnv = process.env): Promise<BuildInfo> {
  cached ??= (async () => {
    const fromImage = env['NFTNP_COMMIT']?.trim().toLowerCase();
    const commit = fromImage !== undefined && COMMIT.test(fromImage) ? fromImage : ((await gitCommit()) ?? 'unknown');
    return { version: packageVersion(), commit, nodejs: process.version };
  })();
  return cached;
}

/** `nft-netpol-agent 0.1.0 (commit 0123abc..., Node.js v24.21.0)` */
export function versionText(b: BuildInfo): string {
  return `nft-netpol-agent ${b.version} (commit ${b.commit}, Node.js ${b.nodejs})`;
}
