// render, explain and validate read the tenancy kinds from manifests, with
// the isolation flags; and the file source (--from-dir) derives them too.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { main } from '../../src/cli/main.ts';
import { contributedPolicies } from '../../src/kinds/registry.ts';
import { FileClusterSource } from '../../src/kube/file-source.ts';
import { DEFAULT_TENANCY } from '../../src/model/tenancy-config.ts';
import { nsnpObject, tenancyObjects } from '../cases/tenancy-cluster.ts';

async function run(argv: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await main(argv, { out: (s) => void (out += `${s}\n`), err: (s) => void (err += `${s}\n`) });
  return { code, out, err };
}

async function withCluster(objects: unknown[], fn: (dir: string) => Promise<void>): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'nftnp-tenancy-'));
  try {
    await writeFile(join(dir, 'cluster.json'), JSON.stringify({ apiVersion: 'v1', kind: 'List', items: objects }));
    await fn(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

const BAD = nsnpObject('shop', 'bad', { policyTypes: ['Egress'], egress: [{ to: [{ service: { name: 'nope' } }] }] });

test('validate: tenancy kinds validated with API field paths; notes do not change the exit code', async () => {
  await withCluster(tenancyObjects({ isolatedWorkspaces: ['acme'], isolatedProjects: ['shop'] }), async (dir) => {
    const ok = await run(['validate', '-f', dir]);
    assert.equal(ok.code, 0, ok.out + ok.err);
    assert.match(ok.err, /note: ns shop has project isolation and is in isolated workspace acme: project isolation applies/);
  });
  const peerless = nsnpObject('shop', 'peerless', {
    ingress: [{ from: [{}] }],
    egress: [{ ports: [{ port: 90, endPort: 80 }] }],
  });
  await withCluster(tenancyObjects({ extra: [BAD, peerless] }), async (dir) => {
    const r = await run(['validate', '-f', dir]);
    assert.equal(r.code, 1);
    assert.deepEqual(r.out.trim().split('\n').sort(), [
      'shop/bad spec.egress[0].to[0].service: Service shop/nope not found: this peer allows nothing',
      'shop/peerless spec.egress[0].ports[0].endPort: must be >= port (90)',
      'shop/peerless spec.ingress[0].from[0]: must specify a peer (namespace, ipBlock or service)',
    ]);
  });
});

test('explain and render: isolation by its cause; the flags change the allowances', async () => {
  await withCluster(tenancyObjects({ isolatedWorkspaces: ['acme'] }), async (dir) => {
    const dns = await run(['explain', '-f', dir, '--from', 'shop/a', '--to', 'kube-system/coredns-0', '--port', '53/udp']);
    assert.equal(dns.code, 0, dns.err);
    assert.match(dns.out, /ALLOWED/);
    assert.match(dns.out, /workspace isolation of acme: DNS to the cluster DNS \(pods of Service kube-system\/kube-dns\)/);
    const none = await run([
      'explain',
      '-f',
      dir,
      '--isolation-dns-service',
      '',
      '--from',
      'shop/a',
      '--to',
      'kube-system/coredns-0',
      '--port',
      '53/udp',
    ]);
    assert.match(none.out, /^DENIED/);
    assert.match(none.out, /denied: workspace acme is isolated and kube-system is not in it \(it is in no workspace\)/);
    const json = await run(['explain', '-f', dir, '-o', 'json', '--from', 'lab/a', '--to', 'shop/a', '--port', '8080']);
    const v = JSON.parse(json.out) as { allowed: boolean; ingress: { policies: string[] } };
    assert.equal(v.allowed, false);
    assert.deepEqual(v.ingress.policies, ['workspace isolation of acme']);

    const a = await run(['render', '--node', 'node-1', '-f', dir]);
    const b = await run(['render', '--node', 'node-1', '-f', dir, '--isolation-node-local-dns', '169.254.20.10']);
    assert.equal(a.code, 0, a.err);
    assert.match(a.out, /ingress policy workspace isolation of acme/);
    assert.match(a.out, /169\.254\.25\.10/);
    assert.doesNotMatch(b.out, /169\.254\.25\.10/);
    assert.match(b.out, /169\.254\.20\.10/);
    const bad = await run(['render', '--node', 'node-1', '-f', dir, '--isolation-node-addresses', 'public']);
    assert.equal(bad.code, 2);
  });
});

test('--from-dir: the file source derives the tenancy kinds when tenancy is on, and not when off', async () => {
  await withCluster(tenancyObjects({ isolatedProjects: ['lab'], extra: [BAD] }), async (dir) => {
    for (const on of [true, false]) {
      const s = new FileClusterSource({ dir, fsWatch: false, pollMs: 0, ...(on ? { tenancy: DEFAULT_TENANCY } : {}) });
      await s.start();
      try {
        const kinds = contributedPolicies(s.snapshot()).map((p) => p.key);
        assert.deepEqual(kinds.sort(), on ? ['NamespaceNetworkPolicy:shop/bad', 'ProjectIsolation:lab'] : [], String(on));
      } finally {
        await s.stop();
      }
    }
  });
});
