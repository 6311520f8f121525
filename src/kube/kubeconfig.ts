// The client configuration of a command run by a person (`status`): found
// where kubectl finds it (--kubeconfig, else every existing file KUBECONFIG
// names, else ~/.kube/config, else the pod's service account), and every way
// of not having a usable one is one line naming the file and the fix, never
// client-node's fallback to http://localhost:8080 ("HTTP protocol is not
// allowed when skipTLSVerify is not set") or a doubled "ENOENT ENOENT".
import { readFileSync, statSync } from 'node:fs';
import { delimiter, dirname, join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';

/** No usable kubeconfig; the message is one line. */
export class KubeConfigError extends Error {}

export interface KubeConfigSources {
  /** --kubeconfig. */
  readonly explicit?: string | undefined;
  /** $KUBECONFIG (a list separated by the path delimiter). */
  readonly kubeconfigEnv?: string | undefined;
  /** $HOME. */
  readonly home?: string | undefined;
  /** $KUBERNETES_SERVICE_HOST: set in every pod. */
  readonly serviceHost?: string | undefined;
  /** Prefix of the service account's mount (tests); the kubelet mounts it at /var/run/secrets/kubernetes.io/serviceaccount. */
  readonly rootPrefix?: string;
}

const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

const exists = (path: string): boolean => {
  try {
    statSync(path);
    return true;
  } catch {
    return false;
  }
};

function readProblem(err: unknown): string {
  const code = (err as { code?: unknown } | null)?.code;
  if (code === 'ENOENT') return 'no such file';
  if (code === 'EACCES' || code === 'EPERM') return 'permission denied';
  if (code === 'EISDIR') return 'is a directory, not a file';
  return (err instanceof Error ? err.message : String(err)).split('\n')[0] ?? '';
}

/** One file into `kc` (merged after the first, as kubectl merges KUBECONFIG's list). */
function loadFile(kc: KubeConfig | undefined, file: string): KubeConfig {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    throw new KubeConfigError(`cannot read kubeconfig ${file}: ${readProblem(e)}`);
  }
  const next = new KubeConfig();
  try {
    next.loadFromString(text);
  } catch (e) {
    const why = (e instanceof Error ? e.message : String(e)).split('\n')[0] ?? '';
    throw new KubeConfigError(`cannot read kubeconfig ${file}: not a kubeconfig (${why})`);
  }
  next.makePathsAbsolute(dirname(file));
  if (kc === undefined) return next;
  kc.mergeConfig(next);
  return kc;
}

/** The current context's cluster must exist and be reachable the way client-node can reach it. */
function checkUsable(kc: KubeConfig, where: string): void {
  const context = kc.getCurrentContext();
  if (context === '' || kc.getContextObject(context) === null)
    throw new KubeConfigError(
      context === ''
        ? `kubeconfig ${where} has no current context (kubectl config use-context NAME)`
        : `kubeconfig ${where}: the current context "${context}" is not defined`,
    );
  const cluster = kc.getCurrentCluster();
  if (cluster === null || cluster.server === '')
    throw new KubeConfigError(`kubeconfig ${where}: context "${context}" names no cluster with a server`);
  if (cluster.server.startsWith('http:') && cluster.skipTLSVerify !== true)
    throw new KubeConfigError(
      `kubeconfig ${where}: cluster "${cluster.name}" is plain HTTP (${cluster.server}); use its https:// address, or set insecure-skip-tls-verify: true on it to accept plain HTTP`,
    );
}

/** The client configuration, or KubeConfigError with one line saying what is missing or wrong. */
export function loadKubeConfig(src: KubeConfigSources): KubeConfig {
  if (src.explicit !== undefined) {
    if (!exists(src.explicit)) throw new KubeConfigError(`no kubeconfig: --kubeconfig ${src.explicit}: no such file`);
    const kc = loadFile(undefined, src.explicit);
    checkUsable(kc, src.explicit);
    return kc;
  }
  const listed = (src.kubeconfigEnv ?? '').split(delimiter).filter((f) => f !== '');
  if (listed.length > 0) {
    // kubectl skips names in KUBECONFIG that do not exist; none existing is no kubeconfig at all.
    const files = listed.filter(exists);
    if (files.length === 0)
      throw new KubeConfigError(
        `no kubeconfig: KUBECONFIG names ${listed.join(delimiter)}, which does not exist (set KUBECONFIG to a kubeconfig file, or use --kubeconfig)`,
      );
    let kc: KubeConfig | undefined;
    for (const f of files) kc = loadFile(kc, f);
    if (kc === undefined) throw new KubeConfigError('no kubeconfig');
    checkUsable(kc, files.join(delimiter));
    return kc;
  }
  const home = src.home === undefined || src.home === '' ? undefined : join(src.home, '.kube', 'config');
  if (home !== undefined && exists(home)) {
    const kc = loadFile(undefined, home);
    checkUsable(kc, home);
    return kc;
  }
  const prefix = src.rootPrefix ?? '';
  if (src.serviceHost !== undefined && src.serviceHost !== '' && exists(`${prefix}${SERVICE_ACCOUNT_DIR}/token`)) {
    const kc = new KubeConfig();
    kc.loadFromCluster(prefix === '' ? undefined : prefix);
    return kc;
  }
  throw new KubeConfigError(
    `no kubeconfig: set KUBECONFIG or --kubeconfig, or create ${home ?? '~/.kube/config'} (not in a pod either: no service account)`,
  );
}
