// The agent's lean client configuration (src/kube/kube-access.ts) and its
// requests (src/kube/kube-http.ts): what it covers, what it leaves to
// client-node, and that its credentials reach a real (fake) API server.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { leanAccessFromKubeconfig, loadLeanAccess } from '../../src/kube/kube-access.ts';
import { KubeApiError, kubeList, kubeRequest } from '../../src/kube/kube-http.ts';
import { FakeApiServer, namespace } from '../support/fake-apiserver.ts';

function kubeconfig(cluster: string, user: string): string {
  return [
    'apiVersion: v1',
    'kind: Config',
    'current-context: c',
    'contexts:',
    '- name: c',
    '  context: {cluster: k, user: u}',
    'clusters:',
    '- name: k',
    '  cluster:',
    ...cluster.split('\n').map((l) => `    ${l}`),
    'users:',
    '- name: u',
    '  user:',
    ...user.split('\n').map((l) => `    ${l}`),
    '',
  ].join('\n');
}

test('a token kubeconfig authenticates lists; a wrong token is a 401 KubeApiError', async () => {
  const api = await FakeApiServer.start({ token: 'secret' });
  try {
    api.create('namespaces', namespace('shop', { team: 'a' }));
    const ok = leanAccessFromKubeconfig(
      kubeconfig(`server: ${api.url}\ninsecure-skip-tls-verify: true`, 'token: secret'),
      '/x/config',
    );
    assert.ok(ok !== undefined);
    const list = await kubeList(ok, '/api/v1/namespaces', { limit: 10 });
    assert.deepEqual(
      list.items.map((n) => (n as { metadata: { name: string } }).metadata.name),
      ['shop'],
    );
    assert.match(String(list.metadata?.resourceVersion), /^\d+$/);
    const bad = leanAccessFromKubeconfig(
      kubeconfig(`server: ${api.url}\ninsecure-skip-tls-verify: true`, 'token: wrong'),
      '/x/config',
    );
    assert.ok(bad !== undefined);
    await assert.rejects(
      kubeRequest(bad, 'GET', '/api/v1/namespaces'),
      (e: unknown) => e instanceof KubeApiError && e.code === 401,
    );
  } finally {
    await api.close();
  }
});

test('tokenFile and certificate paths are read relative to the kubeconfig; data fields are base64', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'kube-access-'));
  const api = await FakeApiServer.start({ token: 'from-file' });
  try {
    await writeFile(join(dir, 'tok'), 'from-file\n');
    const access = leanAccessFromKubeconfig(
      kubeconfig(`server: ${api.url}\ninsecure-skip-tls-verify: true`, 'tokenFile: tok'),
      join(dir, 'config'),
    );
    assert.ok(access !== undefined);
    assert.equal((await kubeList(access, '/api/v1/namespaces', {})).items.length, 0);
    const ca = Buffer.from('not really a CA').toString('base64');
    const tls = leanAccessFromKubeconfig(
      kubeconfig(
        `server: https://k.example:6443\ncertificate-authority-data: ${ca}`,
        'client-certificate: c.crt\nclient-key-data: a2V5',
      ),
      join(dir, 'config'),
    );
    assert.equal(tls, undefined, 'an unreadable client certificate is not covered (client-node reports it)');
    await writeFile(join(dir, 'c.crt'), 'CERT');
    const tls2 = leanAccessFromKubeconfig(
      kubeconfig(
        `server: https://k.example:6443\ncertificate-authority-data: ${ca}`,
        'client-certificate: c.crt\nclient-key-data: a2V5',
      ),
      join(dir, 'config'),
    );
    assert.ok(tls2 !== undefined);
    const opts: import('node:https').RequestOptions = {};
    await tls2.applyToHTTPSOptions(opts);
    assert.equal(String(opts.ca), 'not really a CA');
    assert.equal(String(opts.cert), 'CERT');
    assert.equal(String(opts.key), 'key');
    assert.equal(opts.rejectUnauthorized, undefined, 'TLS verification stays on');
    assert.equal(opts.headers, undefined, 'no bearer token without one');
  } finally {
    await api.close();
    await rm(dir, { recursive: true, force: true });
  }
});

test('what the lean loader leaves to client-node: plugins, basic auth, proxies, plain HTTP without skip, merged lists', async () => {
  const https = 'server: https://k.example:6443';
  assert.equal(leanAccessFromKubeconfig(kubeconfig(https, 'exec: {command: aws}'), '/c'), undefined);
  assert.equal(leanAccessFromKubeconfig(kubeconfig(https, 'auth-provider: {name: oidc}'), '/c'), undefined);
  assert.equal(leanAccessFromKubeconfig(kubeconfig(https, 'username: a\npassword: b'), '/c'), undefined);
  assert.equal(leanAccessFromKubeconfig(kubeconfig(`${https}\nproxy-url: http://p:3128`, 'token: t'), '/c'), undefined);
  assert.equal(leanAccessFromKubeconfig(kubeconfig('server: http://k.example:8080', 'token: t'), '/c'), undefined);
  assert.equal(leanAccessFromKubeconfig('not: [a kubeconfig', '/c'), undefined);
  assert.equal(leanAccessFromKubeconfig('current-context: missing\ncontexts: []\n', '/c'), undefined);
  assert.equal(loadLeanAccess({ KUBECONFIG: '/a:/b' }), undefined, 'a KUBECONFIG list is merged by client-node');
  assert.equal(loadLeanAccess({ KUBECONFIG: '/nonexistent' }), undefined);
  assert.equal(loadLeanAccess({ HOME: '/nonexistent', KUBERNETES_SERVICE_HOST: '' }), undefined, 'nothing at all');
});

test('in a pod: the service account token (re-read for rotation), its CA, the service address', async () => {
  const root = await mkdtemp(join(tmpdir(), 'kube-sa-'));
  try {
    const sa = join(root, 'sa');
    await mkdir(sa);
    await writeFile(join(sa, 'token'), 'tok-1\n');
    await writeFile(join(sa, 'ca.crt'), 'CA');
    const access = loadLeanAccess(
      { HOME: join(root, 'home'), KUBERNETES_SERVICE_HOST: 'fd00::1', KUBERNETES_SERVICE_PORT: '443' },
      sa,
    );
    assert.ok(access !== undefined);
    assert.equal(access.getCurrentCluster().server, 'https://[fd00::1]:443');
    const opts: import('node:https').RequestOptions = {};
    await access.applyToHTTPSOptions(opts);
    assert.equal(String(opts.ca), 'CA');
    assert.deepEqual(opts.headers, { authorization: 'Bearer tok-1' });
    assert.equal(opts.rejectUnauthorized, undefined);
  } finally {
    await rm(root, { recursive: true, force: true });
  }
});

test('a kubeconfig in JSON is read as JSON, a YAML flow mapping (also starting with "{") by the YAML library: both authenticate', async () => {
  const api = await FakeApiServer.start({ token: 'secret' });
  try {
    api.create('namespaces', namespace('shop', { team: 'a' }));
    const config = {
      apiVersion: 'v1',
      kind: 'Config',
      'current-context': 'c',
      contexts: [{ name: 'c', context: { cluster: 'k', user: 'u' } }],
      clusters: [{ name: 'k', cluster: { server: api.url, 'insecure-skip-tls-verify': true } }],
      users: [{ name: 'u', user: { token: 'secret' } }],
    };
    const flow = `{apiVersion: v1, kind: Config, current-context: c, contexts: [{name: c, context: {cluster: k, user: u}}], clusters: [{name: k, cluster: {server: "${api.url}", insecure-skip-tls-verify: true}}], users: [{name: u, user: {token: secret}}]}`;
    for (const text of [JSON.stringify(config, null, 2), flow]) {
      const access = leanAccessFromKubeconfig(text, '/x/config');
      assert.ok(access !== undefined, text);
      const list = await kubeList(access, '/api/v1/namespaces', { limit: 10 });
      assert.deepEqual(
        list.items.map((n) => (n as { metadata: { name: string } }).metadata.name),
        ['shop'],
      );
    }
  } finally {
    await api.close();
  }
});
