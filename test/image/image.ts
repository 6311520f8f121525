// The container image under test: built once per test process with
// scripts/image/build.sh (cached layers make a rebuild with unchanged inputs
// take seconds), run with podman through scripts/image/podman.sh (the
// project's engine and storage settings), and started the way
// daemonset/daemonset.yaml starts it.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { parse } from 'yaml';
import { missingRequirements } from '../harness/requirements.ts';
import { trackPid, untrackPid } from '../harness/netns.ts';

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const PODMAN = join(ROOT, 'scripts/image/podman.sh');
const BUILD = join(ROOT, 'scripts/image/build.sh');

let cachedMissing: string[] | undefined;

/** Why the image tests cannot run here (empty: they can): the datapath requirements plus the container tools. */
export function missingImageRequirements(): string[] {
  if (cachedMissing !== undefined) return cachedMissing;
  const missing = [...missingRequirements()];
  for (const [cmd, pkg] of [
    ['podman', 'podman'],
    ['buildah', 'buildah'],
    ['runc', 'runc'],
    ['debootstrap', 'debootstrap'],
  ] as const) {
    const r = spawnSync(cmd, ['--version'], { encoding: 'utf8' });
    if (r.error !== undefined || r.status !== 0) missing.push(`${cmd} (Debian package ${pkg}; scripts/setup.sh installs it)`);
  }
  cachedMissing = missing;
  return missing;
}

/** Inside a test: skip locally, fail when CI=true, if the image cannot be built and run here. */
export function requireImage(t: TestContext): boolean {
  const missing = missingImageRequirements();
  if (missing.length === 0) return true;
  const message = `image tests need: ${missing.join('; ')}`;
  if (process.env.CI === 'true') throw new Error(`${message}. CI=true: refusing to skip.`);
  t.skip(message);
  return false;
}

export interface Run {
  readonly stdout: string;
  readonly stderr: string;
  readonly exitCode: number;
}

/** scripts/image/podman.sh ARGS. */
export async function podman(args: readonly string[], opts: { reject?: boolean } = {}): Promise<Run> {
  const r = await execa(PODMAN, [...args], { reject: false, stripFinalNewline: false });
  const res = { stdout: String(r.stdout), stderr: String(r.stderr), exitCode: r.exitCode ?? -1 };
  if (res.exitCode !== 0 && opts.reject !== false)
    throw new Error(`podman ${args.join(' ')} exited ${res.exitCode}: ${res.stderr.trim()}`);
  return res;
}

let built: Promise<string> | undefined;

/** Builds the image from the Dockerfile (once per process); resolves to its image ID. */
export function buildImage(): Promise<string> {
  built ??= (async () => {
    const dir = await mkdtemp(join(tmpdir(), 'nftnp-image-'));
    try {
      const iid = join(dir, 'iid');
      const r = await execa(BUILD, ['--iidfile', iid], { reject: false, all: true, cwd: ROOT });
      if (r.exitCode !== 0) throw new Error(`scripts/image/build.sh exited ${r.exitCode}:\n${String(r.all).slice(-6000)}`);
      return (await readFile(iid, 'utf8')).trim();
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  })();
  return built;
}

// ---- the DaemonSet's way of running the container

interface EnvVar {
  readonly name: string;
  readonly value?: unknown;
  readonly valueFrom?: { readonly fieldRef?: { readonly fieldPath?: string } };
}

interface DaemonSetPod {
  readonly hostNetwork?: boolean;
  readonly terminationGracePeriodSeconds?: number;
  readonly automountServiceAccountToken?: boolean;
  readonly securityContext?: { readonly seccompProfile?: { readonly type?: string } };
  readonly containers: readonly {
    readonly args?: readonly string[];
    readonly command?: readonly string[];
    readonly env?: readonly EnvVar[];
    readonly resources?: { readonly limits?: { readonly memory?: string } };
    readonly securityContext?: {
      readonly runAsUser?: number;
      readonly runAsGroup?: number;
      readonly runAsNonRoot?: boolean;
      readonly privileged?: boolean;
      readonly allowPrivilegeEscalation?: boolean;
      readonly readOnlyRootFilesystem?: boolean;
      readonly capabilities?: { readonly drop?: readonly string[]; readonly add?: readonly string[] };
      readonly seccompProfile?: { readonly type?: string };
    };
  }[];
}

export interface DaemonSetRun {
  /** podman run flags for the pod and container settings (network excluded). */
  readonly flags: readonly string[];
  /** The container's env with NODE_NAME and POD_NAMESPACE resolved (fieldRefs spec.nodeName, metadata.namespace). */
  readonly env: Readonly<Record<string, string>>;
  readonly args: readonly string[];
  readonly graceSeconds: number;
  /** Where the service account token is mounted (automountServiceAccountToken). */
  readonly serviceAccountDir: string | undefined;
}

const MEMORY_UNITS: Record<string, string> = { Ki: 'k', Mi: 'm', Gi: 'g' };

/**
 * podman run flags equivalent to daemonset/daemonset.yaml's agent container
 * on node `nodeName`. Anything the mapping does not know throws, so a change
 * of the DaemonSet cannot silently leave the image test behind.
 */
export async function daemonSetRun(nodeName: string): Promise<DaemonSetRun> {
  const ds = parse(await readFile(join(ROOT, 'daemonset/daemonset.yaml'), 'utf8')) as {
    spec: { template: { spec: DaemonSetPod } };
  };
  const pod = ds.spec.template.spec;
  const c = pod.containers[0];
  if (c === undefined || pod.containers.length !== 1) throw new Error('daemonset.yaml: expected exactly one container');
  if (c.command !== undefined) throw new Error('daemonset.yaml: command overrides the image ENTRYPOINT; map it here');
  if (pod.hostNetwork !== true)
    throw new Error('daemonset.yaml: hostNetwork is no longer true; the test runs in the node namespace');
  const sc = c.securityContext ?? {};
  const flags: string[] = [];
  flags.push('--user', `${sc.runAsUser ?? 0}:${sc.runAsGroup ?? 0}`);
  if (sc.runAsNonRoot === true) throw new Error('daemonset.yaml: runAsNonRoot: true is not mapped');
  if (sc.privileged === true) flags.push('--privileged');
  if (sc.allowPrivilegeEscalation === false) flags.push('--security-opt', 'no-new-privileges');
  // Kubernetes mounts no tmpfs anywhere for readOnlyRootFilesystem; neither may podman.
  if (sc.readOnlyRootFilesystem === true) flags.push('--read-only', '--read-only-tmpfs=false');
  for (const cap of sc.capabilities?.drop ?? []) flags.push('--cap-drop', cap === 'ALL' ? 'all' : cap);
  for (const cap of sc.capabilities?.add ?? []) flags.push('--cap-add', cap);
  for (const profile of [pod.securityContext?.seccompProfile?.type, sc.seccompProfile?.type]) {
    // RuntimeDefault is the engine's default profile: podman applies its own unless told otherwise.
    if (profile !== undefined && profile !== 'RuntimeDefault')
      throw new Error(`daemonset.yaml: seccomp ${profile} is not mapped`);
  }
  const memory = c.resources?.limits?.memory;
  if (memory !== undefined) {
    const m = /^(\d+)(Ki|Mi|Gi)$/.exec(memory);
    if (m === null) throw new Error(`daemonset.yaml: memory limit ${memory} is not mapped`);
    flags.push('--memory', `${m[1]}${MEMORY_UNITS[m[2]!]}`);
  }
  const env: Record<string, string> = {};
  for (const e of c.env ?? []) {
    if (typeof e.value === 'string') env[e.name] = e.value;
    else if (e.valueFrom?.fieldRef?.fieldPath === 'spec.nodeName') env[e.name] = nodeName;
    // The kustomization puts the DaemonSet into nft-netpol-system.
    else if (e.valueFrom?.fieldRef?.fieldPath === 'metadata.namespace') env[e.name] = 'nft-netpol-system';
    else throw new Error(`daemonset.yaml: env ${e.name} is neither a literal, spec.nodeName nor metadata.namespace; map it here`);
  }
  return {
    flags,
    env,
    args: c.args ?? [],
    graceSeconds: pod.terminationGracePeriodSeconds ?? 30,
    serviceAccountDir: pod.automountServiceAccountToken === false ? undefined : '/var/run/secrets/kubernetes.io/serviceaccount',
  };
}

export type LogLine = Record<string, unknown>;

/** A container started attached (`podman run --name N ...`): its JSON log lines and its exit. */
export class Container {
  readonly name: string;
  readonly lines: LogLine[] = [];
  stderr = '';
  readonly exited: Promise<number | null>;
  readonly #child: ChildProcess;
  #buf = '';

  private constructor(name: string, child: ChildProcess) {
    this.name = name;
    this.#child = child;
    this.exited = new Promise((resolve) => child.once('exit', (code) => resolve(code)));
    child.stdout?.setEncoding('utf8').on('data', (d: string) => {
      this.#buf += d;
      let i;
      while ((i = this.#buf.indexOf('\n')) >= 0) {
        const line = this.#buf.slice(0, i);
        this.#buf = this.#buf.slice(i + 1);
        try {
          this.lines.push(JSON.parse(line) as LogLine);
        } catch {
          this.lines.push({ raw: line });
        }
      }
    });
    child.stderr?.setEncoding('utf8').on('data', (d: string) => (this.stderr += d));
  }

  /** `podman run --name NAME FLAGS... IMAGE ARGS...`, attached (not removed on exit: the exit code is read afterwards). */
  static start(name: string, flags: readonly string[], image: string, args: readonly string[]): Container {
    const child = spawn(PODMAN, ['run', '--name', name, ...flags, image, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    if (child.pid !== undefined) trackPid(child.pid);
    return new Container(name, child);
  }

  running(): boolean {
    return this.#child.exitCode === null && this.#child.signalCode === null;
  }

  tail(n = 30): string {
    return [...this.lines.slice(-n).map((l) => JSON.stringify(l)), this.stderr.trim()].join('\n');
  }

  /** `podman stop --time GRACE`: SIGTERM to PID 1 (tini), SIGKILL after the grace period. Resolves to the container's exit code. */
  async stop(graceSeconds: number): Promise<number> {
    await podman(['stop', '--time', String(graceSeconds), this.name]);
    await this.exited;
    return this.exitCode();
  }

  async exitCode(): Promise<number> {
    const r = await podman(['inspect', '--format', '{{.State.ExitCode}}', this.name]);
    return Number(r.stdout.trim());
  }

  /** Removes the container whatever its state (test cleanup). */
  async remove(): Promise<void> {
    await podman(['rm', '--force', '--time', '0', this.name], { reject: false });
    if (this.#child.pid !== undefined) untrackPid(this.#child.pid);
  }
}

/** A container name unique to this process and call. */
let counter = 0;
export function containerName(role: string): string {
  counter += 1;
  return `nftnp-test-${process.pid}-${counter}-${role}`;
}

/** Removes containers left by test processes that died (SIGKILL, crash); live runs are never touched. */
export async function sweepStaleContainers(): Promise<void> {
  const names = (await podman(['ps', '--all', '--format', '{{.Names}}'])).stdout.split('\n');
  for (const name of names) {
    const pid = Number(/^nftnp-test-(\d+)-/.exec(name)?.[1]);
    if (!Number.isInteger(pid) || pid === process.pid) continue;
    try {
      process.kill(pid, 0);
      continue;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'EPERM') continue;
    }
    await podman(['rm', '--force', '--time', '0', name], { reject: false });
  }
}
