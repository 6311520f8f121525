// The agent container's environment as daemonset/daemonset.yaml sets it: the
// benchmarks run the agent with exactly what ships (a test checks they do).
import { readFileSync } from 'node:fs';
import { parse } from 'yaml';

/** Values of `names` in the first container's env of the DaemonSet in `file` (literal values only). */
export function daemonsetEnv(file: string, names: readonly string[]): Record<string, string> {
  const ds = parse(readFileSync(file, 'utf8')) as {
    spec?: { template?: { spec?: { containers?: { env?: { name: string; value?: unknown }[] }[] } } };
  };
  const env = ds.spec?.template?.spec?.containers?.[0]?.env ?? [];
  const out: Record<string, string> = {};
  for (const n of names) {
    const v = env.find((e) => e.name === n)?.value;
    if (typeof v !== 'string') throw new Error(`${file}: the agent container sets no literal ${n}`);
    out[n] = v;
  }
  return out;
}
