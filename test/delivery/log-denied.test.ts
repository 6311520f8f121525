// --log-denied in the shipped manifests: off in the base DaemonSet (which
// keeps NET_ADMIN only), on with the kustomize component daemonset/log-denied/,
// which also grants the SETUID and SETGID tcpdump needs to drop to its own
// user; the image ships tcpdump. With kubectl or kustomize on PATH an overlay
// of base and component is rendered and checked for the merged result.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { DAEMONSET_DIR, DASHBOARD_FILE, ROOT, arr, at, parseYamlStream, readText, readYaml, rec, run, which } from './support.ts';

const OVERLAY = join(DAEMONSET_DIR, 'log-denied');

function agentContainer(ds: unknown): Record<string, unknown> {
  const containers = arr(at(ds, 'spec.template.spec.containers'), 'containers').map((c) => rec(c, 'container'));
  const agent = containers.find((c) => c.name === 'agent');
  assert.ok(agent !== undefined, 'the agent container');
  return agent;
}

function envOf(c: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(arr(c.env, 'env').map((e) => [rec(e, 'env').name, rec(e, 'env').value]));
}

describe('--log-denied delivery', () => {
  test('the base DaemonSet spells LOG_DENIED out as "false" and keeps NET_ADMIN only', () => {
    const agent = agentContainer(readYaml(join(DAEMONSET_DIR, 'daemonset.yaml')));
    assert.equal(envOf(agent)['LOG_DENIED'], 'false');
    assert.deepEqual(at(agent, 'securityContext.capabilities'), { drop: ['ALL'], add: ['NET_ADMIN'] });
  });

  test('the component: LOG_DENIED=true and NET_ADMIN, SETUID, SETGID', () => {
    const k = rec(readYaml(join(OVERLAY, 'kustomization.yaml')), 'kustomization');
    assert.equal(k.kind, 'Component');
    const patchFile = str0(at(arr(k.patches, 'patches')[0], 'path'));
    const patch = readYaml(join(OVERLAY, patchFile));
    assert.equal(at(patch, 'metadata.name'), 'nft-netpol-agent');
    const agent = agentContainer(patch);
    assert.equal(envOf(agent)['LOG_DENIED'], 'true');
    assert.deepEqual(at(agent, 'securityContext.capabilities'), { drop: ['ALL'], add: ['NET_ADMIN', 'SETUID', 'SETGID'] });
  });

  test('rendered with kustomize: the merged DaemonSet has both (skipped without kubectl/kustomize)', (t) => {
    const kubectl = which('kubectl');
    const standalone = which('kustomize');
    if (kubectl === undefined && standalone === undefined) {
      t.skip('neither kubectl nor kustomize on PATH');
      return;
    }
    const dir = mkdtempSync(join(tmpdir(), 'nftnp-log-denied-'));
    try {
      writeFileSync(
        join(dir, 'kustomization.yaml'),
        `apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - ${relative(dir, DAEMONSET_DIR)}\ncomponents:\n  - ${relative(dir, OVERLAY)}\n`,
      );
      const r = kubectl !== undefined ? run(kubectl, ['kustomize', dir]) : run(standalone ?? 'kustomize', ['build', dir]);
      assert.equal(r.status, 0, r.stderr);
      const ds = parseYamlStream(r.stdout, 'kustomize').find((o) => rec(o, 'object').kind === 'DaemonSet');
      const agent = agentContainer(ds);
      assert.equal(envOf(agent)['LOG_DENIED'], 'true');
      assert.equal(
        envOf(agent)['NODE_OPTIONS'],
        envOf(agentContainer(readYaml(join(DAEMONSET_DIR, 'daemonset.yaml'))))['NODE_OPTIONS'],
      );
      assert.deepEqual(at(agent, 'securityContext.capabilities'), { drop: ['ALL'], add: ['NET_ADMIN', 'SETUID', 'SETGID'] });
      assert.equal(at(agent, 'securityContext.readOnlyRootFilesystem'), true);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('the dashboard has a "Top denied pods" panel over the per-pod deny counter', () => {
    const d = JSON.parse(readText(DASHBOARD_FILE)) as { panels: { title: string; targets?: { expr: string }[] }[] };
    const top = d.panels.find((p) => p.title === 'Top denied pods');
    assert.match(
      top?.targets?.[0]?.expr ?? '',
      /^topk\(10, sum by \(node, namespace, pod, direction\) \(rate\(nftnp_pod_denied_packets_total\{/,
    );
  });

  test('the image installs tcpdump; CI installs it for the tests', () => {
    assert.match(readText(join(ROOT, 'Dockerfile')), /--no-install-recommends nftables conntrack tcpdump tini/);
    assert.ok(readText(join(ROOT, '.ci/apt-packages')).split('\n').includes('tcpdump'));
  });
});

function str0(v: unknown): string {
  assert.equal(typeof v, 'string');
  return v as string;
}
