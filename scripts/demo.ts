// `npm run demo` (as root): brings up a simulated cluster of network
// namespaces for the manifests in examples/ (nodes at their InternalIPs, pods
// at their own IPs, each serving its container ports), applies each node's
// ruleset exactly as the agent does, prints what the oracle expects and what
// real packets did as upstream-style truth tables, and removes everything.
//
//   npm run demo -- [-f DIR]... [--style routed|bridged] [--ports TCP/8080,UDP/53]
//                   [--deny drop|reject] [--ipv6] [--keep]
//
// --keep leaves the cluster up until Ctrl-C and prints how to look inside.
import { parseArgs } from 'node:util';
import { loadManifests } from '../src/model/load.ts';
import { buildState } from '../src/model/normalize.ts';
import { formatValidationError, PROTOCOLS } from '../src/model/types.ts';
import type { ClusterState, Family } from '../src/model/types.ts';
import { formatReport, observeTable } from '../test/support/truth-table.ts';
import { Cluster } from '../test/harness/cluster.ts';
import type { NetworkStyle } from '../test/harness/cluster.ts';
import { applyState } from '../test/harness/enforce.ts';
import { clusterSpecFromState, placeablePods } from '../test/harness/from-state.ts';
import { describeOutcome, probeMatrix } from '../test/harness/probe.ts';
import { oracle } from '../test/harness/regression.ts';
import { missingRequirements } from '../test/harness/requirements.ts';
import { cnpScene } from './demo-cnp.ts';

const USAGE = `usage: npm run demo -- [-f DIR]... [--style routed|bridged] [--ports TCP/8080,UDP/53]
                       [--deny drop|reject] [--ipv6] [--keep]

Brings up a simulated cluster (network namespaces, as root) for the manifests
(default examples/), applies each node's ruleset as the agent does, and prints
for every port what the evaluator expects and what real packets did. Without
-f and --keep, a ClusterNetworkPolicy scene follows (scripts/demo-cnp.ts).

  -f, --file DIR     manifests (repeatable; default examples/)
  --style S          routed (default) or bridged pod networks
  --ports LIST       PROTOCOL/PORT,... (default TCP/8080,TCP/5432,UDP/53)
  --deny ACTION      drop (default) or reject
  --ipv6             probe over IPv6 instead of IPv4
  --keep             leave the cluster up until Ctrl-C
  -h, --help         show this help`;

function usage(message: string): never {
  console.error(`usage error: ${message}\n(see 'npm run demo -- --help')`);
  process.exit(2);
}

let values;
try {
  values = parseArgs({
    options: {
      file: { type: 'string', short: 'f', multiple: true },
      style: { type: 'string', default: 'routed' },
      ports: { type: 'string', default: 'TCP/8080,TCP/5432,UDP/53' },
      deny: { type: 'string', default: 'drop' },
      ipv6: { type: 'boolean', default: false },
      keep: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
  }).values;
} catch (e) {
  usage(e instanceof Error ? e.message : String(e));
}
if (values.help) {
  console.log(USAGE);
  process.exit(0);
}
const styleText = values.style;
const denyText = values.deny;
if (styleText !== 'routed' && styleText !== 'bridged') usage(`--style must be routed or bridged, not "${styleText}"`);
if (denyText !== 'drop' && denyText !== 'reject') usage(`--deny must be drop or reject, not "${denyText}"`);
const style: NetworkStyle = styleText;
const denyAction = denyText;
const family: Family = values.ipv6 ? 6 : 4;
const ports = values.ports.split(',').map((s) => {
  const [proto, port] = s.trim().split('/');
  const protocol = PROTOCOLS.find((p) => p === proto?.toUpperCase());
  const n = Number(port);
  if (protocol === undefined || !Number.isInteger(n) || n < 1 || n > 65535)
    usage(`--ports: "${s}" is not PROTOCOL/PORT (TCP, UDP or SCTP; port 1-65535)`);
  return { protocol, port: n };
});

// After the flags: a usage mistake is told as such, also without root.
const missing = missingRequirements();
if (missing.length > 0) {
  console.error(`demo needs: ${missing.join('; ')}`);
  process.exit(2);
}

const loaded = await loadManifests(values.file ?? ['examples/']);
for (const e of loaded.errors) console.error(`${e.source}: ${e.message}`);
const { state, errors } = buildState(loaded.objects);
for (const e of errors) console.error(`warning: ${formatValidationError(e)}`);

function summary(s: ClusterState): string {
  return `${s.namespaces.length} namespaces, ${s.pods.length} pods (${placeablePods(s).length} with an address on a node), ${s.policies.length} policies, ${s.nodes.length} nodes`;
}

console.log(`manifests: ${summary(state)}`);
const t0 = Date.now();
const c = await Cluster.create(
  clusterSpecFromState(state, style, { extraPorts: [...new Set(ports.filter((p) => p.protocol !== 'SCTP').map((p) => p.port))] }),
);
try {
  console.log(`\n${c.describe()}\n(up in ${Date.now() - t0} ms)\n`);
  const applied = await applyState(c, state, { denyAction });
  for (const a of applied)
    console.log(
      `applied ${a.node}: ${a.stats.chains} chains, ${a.stats.rules} rules, ${a.stats.sets} sets, ${a.stats.elements} elements (${a.stats.localPods} local pods, ${a.stats.policies} policies)`,
    );

  const keys = c.pods.map((p) => p.key);
  let wrong = 0;
  for (const { protocol, port } of ports) {
    const { observed, outcomes } = await probeMatrix(c, { protocol, port, family, via: 'service' });
    const byPair = new Map(outcomes.map((o) => [`${o.probe.from}\0${o.probe.to}`, o]));
    const expected = observeTable(keys, (from, to) =>
      from === to ? undefined : oracle(c, state, byPair.get(`${from}\0${to}`)!.probe).allowed,
    );
    const report = formatReport(expected, observed, {
      layout: 'aligned',
      title: `\n==== ${protocol}/${port} IPv${family} via ClusterIP (${style}, deny ${denyAction}); expected = verdict(), observed = packets ====`,
    });
    console.log(report);
    const bad = outcomes.filter((o) => o.connected !== expected.values[o.probe.from]?.[o.probe.to]);
    wrong += bad.length;
    for (const o of bad) console.log(`  MISMATCH ${describeOutcome(o)}`);
  }
  console.log(wrong === 0 ? '\nevery probe matched the evaluator' : `\n${wrong} probe(s) differ from the evaluator`);

  if (values.keep) {
    const n = c.nodes[0]!;
    const p = c.pods[0];
    console.log(
      `\nThe cluster stays up until Ctrl-C. Try:\n  ip netns exec ${n.netns} nft list table inet nft-netpol\n  ip netns exec ${n.netns} nft list table inet harness-kube-proxy`,
    );
    if (p !== undefined) console.log(`  ip netns exec ${p.netns} ip addr          # ${p.key}`);
    await new Promise<void>((resolve) => {
      process.once('SIGINT', resolve);
      process.once('SIGTERM', resolve);
    });
  }
  process.exitCode = wrong === 0 ? 0 : 1;
} finally {
  await c.destroy();
  console.log(`removed ${c.namespaces.length} namespaces`);
}

// The ClusterNetworkPolicy scene (scripts/demo-cnp.ts) after the examples, unless other manifests were asked for.
if (values.file === undefined && !values.keep && process.exitCode === 0 && (await cnpScene({ style, denyAction, family })) > 0)
  process.exitCode = 1;
