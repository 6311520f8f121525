// The yaml library, loaded on first use. The node agent in a cluster reads
// no YAML (a service account; a kubeconfig in JSON is read as JSON), and the
// library's code costs ~1-2.5 MiB of the agent's RSS when imported at start
// (issue 24, memory). Its CommonJS build, so that the callers stay synchronous.
import { createRequire } from 'node:module';

type Yaml = typeof import('yaml');

let lib: Yaml | undefined;

export function yaml(): Yaml {
  return (lib ??= createRequire(import.meta.url)('yaml') as Yaml);
}
