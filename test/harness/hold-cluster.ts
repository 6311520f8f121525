// Test helper: brings up a small cluster, prints its namespace prefix and its
// agents' pids as one JSON line, then waits to be killed. Used to check that
// an interrupted run leaves nothing behind.
import { Cluster } from './cluster.ts';

const style = process.argv[2] === 'bridged' ? 'bridged' : 'routed';
const c = await Cluster.create({
  style,
  nodes: [{ name: 'node-1' }, { name: 'node-2' }],
  pods: [
    { key: 'x/a', node: 'node-1' },
    { key: 'x/b', node: 'node-2' },
  ],
});
const pids = [...c.pods.map((p) => p.agent.pid), ...c.nodes.map((n) => n.agent?.pid), c.outside.agent.pid];
process.stdout.write(`${JSON.stringify({ prefix: c.prefix, namespaces: c.namespaces, pids })}\n`);
setInterval(() => {}, 1 << 30);
