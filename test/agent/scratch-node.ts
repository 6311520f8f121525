// One node's agent against the test API server, applying into a scratch
// network namespace: the fixture of the process tests that check the kernel
// (process-kernel, process-status). The API server holds namespace shop with
// a local pod (db) and two remote ones (web, other); agents started through
// `start` are stopped, and a hung nft they left (the `sleeping` pid file of
// the fake nft) killed, when the test ends.
import type { TestContext } from 'node:test';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { FakeApiServer, namespace, node, pod } from '../support/fake-apiserver.ts';
import { createNetns, deleteNetns, uniquePrefix } from '../harness/netns.ts';
import { requireDatapath } from '../harness/requirements.ts';
import { AgentProcess, scratch, type Scratch } from './agent-process.ts';

export const NODE = 'node-1';
export const DB_IP = '10.244.1.10';
export const WEB_IP = '10.244.2.10';
export const OTHER_IP = '10.244.2.11';

export interface ScratchNode {
  readonly api: FakeApiServer;
  readonly netns: string;
  readonly s: Scratch;
  readonly agents: AgentProcess[];
  /** Starts the agent of NODE with these arguments (and another nft binary, if given). */
  start(args: readonly string[], nft?: string): AgentProcess;
}

/** undefined when the machine cannot run datapath tests (skipped locally, failing in CI). */
export async function scratchNode(t: TestContext, netnsSuffix: string): Promise<ScratchNode | undefined> {
  if (!requireDatapath(t)) return undefined;
  const api = await FakeApiServer.start();
  const netns = `${uniquePrefix()}${netnsSuffix}`;
  await createNetns([netns]);
  const s = await scratch(api);
  const agents: AgentProcess[] = [];
  t.after(async () => {
    for (const a of agents) await a.stop();
    const sleeping = await readFile(join(s.dir, 'sleeping'), 'utf8').catch(() => undefined);
    if (sleeping !== undefined) {
      try {
        process.kill(Number(sleeping.trim()), 'SIGKILL');
      } catch {
        // already gone
      }
    }
    await deleteNetns([netns]);
    await api.close();
    await s.cleanup();
  });
  api.create('namespaces', namespace('shop'));
  api.create('nodes', node(NODE, ['172.18.0.11']));
  api.create('pods', pod('shop', 'db', { app: 'db' }, NODE, DB_IP));
  api.create('pods', pod('shop', 'web', { app: 'web' }, 'node-2', WEB_IP));
  api.create('pods', pod('shop', 'other', { app: 'other' }, 'node-2', OTHER_IP));
  return {
    api,
    netns,
    s,
    agents,
    start(args, nft) {
      const a = AgentProcess.start({
        node: NODE,
        netns,
        kubeconfig: s.kubeconfig,
        args: [...args],
        ...(nft === undefined ? {} : { nft }),
      });
      agents.push(a);
      return a;
    },
  };
}
