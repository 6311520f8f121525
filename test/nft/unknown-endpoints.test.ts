// Real packets: a node namespace routes between a "pods" namespace (two
// addresses of the node's pod CIDR, only one of them a known pod) and a
// "remote" namespace. With podCIDRs the unknown address is dropped both ways
// and towards the node itself (fail closed) while the known, non-isolated pod
// passes, the node still talks to itself from its gateway address, and an
// element update that adds the pod opens it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { compileNode } from '../../src/compile/compile.ts';
import type { RenderOptions } from '../../src/ruleset/options.ts';
import { runNft } from '../../src/nft/exec.ts';
import { renderRuleset } from '../../src/nft/render.ts';
import { renderUpdate } from '../../src/nft/update.ts';
import type { Pod } from '../../src/model/types.ts';
import { pod, state } from '../support/state-builder.ts';
import { inNetns, tcpProbe, withNetns } from './netns-support.ts';
import { haveNft } from './nft-support.ts';

const KNOWN = '10.0.1.2';
const UNKNOWN = '10.0.1.3';
const GATEWAY = '10.0.1.1';
const REMOTE = '10.0.2.2';
// Nothing listens: a connection `refused` by an RST proves the SYN got through.
const PORT = 9;

const node = { name: 'node-1', addresses: ['192.168.100.1'], podCIDRs: ['10.0.1.0/24'] };
const known = pod('a', 'known', { labels: { app: 'batch' }, ips: [KNOWN] });
const remote = pod('b', 'client', { ips: [REMOTE], node: 'node-2' });
const compile = (pods: Pod[], o?: Partial<RenderOptions>) =>
  compileNode(state({ pods, nodes: [node] }), 'node-1', { table: 'nftnp-unknown', unknownLocalEndpoints: 'drop', ...o });

async function ip(netns: string, ...lines: string[][]): Promise<void> {
  for (const l of lines) await inNetns(netns, 'ip', l);
}

/** Packets the "unknown local endpoint" rule of a base chain has dropped. */
async function unknownDrops(netns: string, chain: string): Promise<number> {
  const text = await inNetns(netns, 'nft', ['list', 'chain', 'inet', 'nftnp-unknown', chain]);
  const m = /counter packets (\d+) bytes \d+ drop comment "unknown local endpoint"/.exec(text);
  assert.ok(m, text);
  return Number(m[1]);
}

test('kernel: an address of the pod CIDR that is no known pod is dropped; known pods and the node pass', async (t) => {
  if (!(await haveNft(t))) return;
  await withNetns(3, async ([n, p, r]) => {
    if (n === undefined || p === undefined || r === undefined) return;
    await ip(
      n,
      ['link', 'add', 'p0', 'type', 'veth', 'peer', 'name', 'eth0', 'netns', p],
      ['link', 'add', 'r0', 'type', 'veth', 'peer', 'name', 'eth0', 'netns', r],
    );
    await ip(
      n,
      ['addr', 'add', `${GATEWAY}/24`, 'dev', 'p0'],
      ['addr', 'add', '10.0.2.1/24', 'dev', 'r0'],
      ['link', 'set', 'p0', 'up'],
      ['link', 'set', 'r0', 'up'],
      ['link', 'set', 'lo', 'up'],
    );
    await inNetns(n, 'sysctl', ['-qw', 'net.ipv4.ip_forward=1']);
    await ip(
      p,
      ['addr', 'add', `${KNOWN}/24`, 'dev', 'eth0'],
      ['addr', 'add', `${UNKNOWN}/24`, 'dev', 'eth0'],
      ['link', 'set', 'eth0', 'up'],
      ['route', 'add', 'default', 'via', GATEWAY],
    );
    await ip(
      r,
      ['addr', 'add', `${REMOTE}/24`, 'dev', 'eth0'],
      ['link', 'set', 'eth0', 'up'],
      ['route', 'add', 'default', 'via', '10.0.2.1'],
    );

    // Without our table everything is reachable (the setup itself works).
    assert.equal(await tcpProbe(r, UNKNOWN, PORT), 'refused');

    const prev = compile([known, remote]);
    const applied = await runNft(renderRuleset(prev), { netns: n });
    assert.ok(applied.ok, applied.ok ? '' : applied.error);
    assert.equal(await tcpProbe(r, KNOWN, PORT), 'refused', 'remote -> known pod');
    assert.equal(await tcpProbe(p, REMOTE, PORT, KNOWN), 'refused', 'known pod -> remote');
    assert.equal(await tcpProbe(r, UNKNOWN, PORT), 'timeout', 'remote -> unknown address');
    assert.ok((await unknownDrops(n, 'forward-ingress')) > 0, 'dropped by forward-ingress');
    assert.equal(await tcpProbe(p, REMOTE, PORT, UNKNOWN), 'timeout', 'unknown address -> remote');
    assert.ok((await unknownDrops(n, 'forward-egress')) > 0, 'dropped by forward-egress');
    assert.equal(await tcpProbe(p, GATEWAY, PORT, UNKNOWN), 'timeout', 'unknown address -> the node itself');
    assert.ok((await unknownDrops(n, 'input-egress')) > 0, 'dropped by input-egress');
    assert.equal(await tcpProbe(p, GATEWAY, PORT, KNOWN), 'refused', 'known pod -> the node itself');
    // The gateway address lies in the pod CIDR: the node talking to itself from it is not a pod.
    assert.equal(await tcpProbe(n, GATEWAY, PORT, GATEWAY), 'refused', 'node -> itself, from its gateway address');

    // The pod becomes known: one element update, and it passes.
    const next = compile([known, pod('a', 'new', { ips: [UNKNOWN] }), remote]);
    const u = renderUpdate(prev, next);
    assert.equal(u.kind, 'incremental');
    const updated = await runNft(u.text, { netns: n });
    assert.ok(updated.ok, updated.ok ? '' : updated.error);
    assert.equal(await tcpProbe(r, UNKNOWN, PORT), 'refused', 'remote -> newly known pod');
    assert.equal(await tcpProbe(p, REMOTE, PORT, UNKNOWN), 'refused', 'newly known pod -> remote');
    assert.equal(await tcpProbe(p, GATEWAY, PORT, UNKNOWN), 'refused', 'newly known pod -> the node itself');

    // Switched off: unknown addresses pass as without podCIDRs.
    const allow = await runNft(renderRuleset(compile([known, remote], { unknownLocalEndpoints: 'allow' })), { netns: n });
    assert.ok(allow.ok, allow.ok ? '' : allow.error);
    assert.equal(await tcpProbe(r, UNKNOWN, PORT), 'refused', 'allow: remote -> unknown address');
  });
});
