// The container image, built from the repository's Dockerfile
// (scripts/image/build.sh) and run with podman:
//   - what is in it: exec-form entry point through tini, no npm, only the
//     lockfile's production dependencies, nothing left by the build;
//   - the CLI in the image says exactly what the CLI of the source tree says;
//   - run as daemonset/daemonset.yaml runs it (its uid, capabilities,
//     read-only root, no_new_privs, env, args, memory limit; in the node's
//     network namespace as hostNetwork), with every shell and package manager
//     of the image masked, the agent enforces policies on real packets, first
//     from --from-dir, then from the test API server through its in-cluster
//     service account; SIGTERM reaches it through tini, it exits 0 within the
//     grace period and the ruleset stays in force.
// Needs root, podman, buildah, runc, debootstrap, nft, ip: skipped locally
// without them, failing when CI=true.
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readdir, readFile, realpath, rm, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import tls from 'node:tls';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { execa } from 'execa';
import { Cluster } from '../harness/cluster.ts';
import { checkProbes, type Expectation } from '../harness/check.ts';
import { NetnsBridge } from '../harness/netns-bridge.ts';
import { FakeApiServer, namespace, networkPolicy, pod, type KubeObject } from '../support/fake-apiserver.ts';
import { eventually, listTableIn, metricFrom } from '../agent/agent-process.ts';
import {
  buildImage,
  Container,
  containerName,
  daemonSetRun,
  podman,
  requireImage,
  ROOT,
  sweepStaleContainers,
  type DaemonSetRun,
} from './image.ts';

const LONG = { timeout: 40 * 60_000 };

// ---- the image's file system (podman image mount), shared by the tests of this file

let mounted: { image: string; rootfs: string } | undefined;
async function rootfsOf(image: string): Promise<string> {
  if (mounted?.image === image) return mounted.rootfs;
  const rootfs = (await podman(['image', 'mount', image])).stdout.trim();
  mounted = { image, rootfs };
  return rootfs;
}
after(async () => {
  if (mounted !== undefined) await podman(['image', 'unmount', mounted.image], { reject: false });
});

/** Paths (inside the image) of every shell /etc/shells names and every package manager, symlinks resolved. */
async function shellsAndPackageManagers(rootfs: string): Promise<string[]> {
  const inImage = async (p: string): Promise<string | undefined> => {
    const host = join(rootfs, p);
    if (!existsSync(host)) return undefined;
    const real = await realpath(host);
    return real.startsWith(rootfs) ? real.slice(rootfs.length) : undefined;
  };
  const shells = (await readFile(join(rootfs, 'etc/shells'), 'utf8'))
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l.startsWith('/'));
  const managers: string[] = [];
  for (const dir of ['/usr/bin', '/usr/sbin', '/usr/local/bin', '/usr/local/sbin']) {
    const names = await readdir(join(rootfs, dir)).catch(() => [] as string[]);
    for (const n of names)
      if (/^(apt|apt-get|apt-cache|apt-config|apt-key|apt-mark|dpkg|dpkg-.*|npm|npx|corepack|yarn|yarnpkg|pip.*)$/.test(n))
        managers.push(`${dir}/${n}`);
  }
  const found = await Promise.all([...shells, ...managers].map(inImage));
  return [...new Set(found.filter((p): p is string => p !== undefined))].sort();
}

/** Top-level package directories of a node_modules (scoped ones as @scope/name). */
async function packagesIn(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const n of await readdir(dir)) {
    if (n.startsWith('.')) continue;
    if (n.startsWith('@')) for (const s of await readdir(join(dir, n))) out.push(`${n}/${s}`);
    else out.push(n);
  }
  return out.sort();
}

async function sourceCli(args: readonly string[]): Promise<{ stdout: string; exitCode: number }> {
  const r = await execa(process.execPath, [join(ROOT, 'src/cli/main.ts'), ...args], {
    cwd: ROOT,
    reject: false,
    stripFinalNewline: false,
    env: { NODE_OPTIONS: '' },
  });
  return { stdout: String(r.stdout), exitCode: r.exitCode ?? -1 };
}

async function imageCli(image: string, args: readonly string[]): Promise<{ stdout: string; exitCode: number }> {
  // The manifests at the same relative paths as in the source tree, read-only.
  const r = await podman(
    [
      'run',
      '--rm',
      '--network',
      'none',
      '--read-only',
      '--cap-drop',
      'all',
      '--volume',
      `${join(ROOT, 'examples')}:/work/examples:ro`,
      '--volume',
      `${join(ROOT, 'examples-invalid')}:/work/examples-invalid:ro`,
      '--workdir',
      '/work',
      image,
      ...args,
    ],
    { reject: false },
  );
  return { stdout: r.stdout, exitCode: r.exitCode };
}

describe('container image', () => {
  test(
    'contents: exec-form entry point through tini, no npm, production dependencies only, nothing left by the build',
    LONG,
    async (t) => {
      if (!requireImage(t)) return;
      const image = await buildImage();
      const [info] = JSON.parse((await podman(['image', 'inspect', image])).stdout) as {
        Config: { Entrypoint?: string[]; Cmd?: string[]; User?: string; Env?: string[]; Labels?: Record<string, string> };
      }[];
      assert.ok(info !== undefined);
      assert.deepEqual(info.Config.Entrypoint, ['/usr/bin/tini', '--', 'node', '/app/dist/cli/main.js']);
      assert.deepEqual(info.Config.Cmd, ['run']);
      assert.equal(info.Config.User, '0:0');
      assert.ok(info.Config.Env?.includes('NODE_ENV=production'));
      const pkg = JSON.parse(await readFile(join(ROOT, 'package.json'), 'utf8')) as { version: string };
      assert.equal(info.Config.Labels?.['org.opencontainers.image.version'], pkg.version);

      const rootfs = await rootfsOf(image);
      // tini and node are programs, not scripts: nothing between PID 1 and the agent reads a #! line.
      for (const bin of ['usr/bin/tini', 'usr/local/bin/node', 'usr/sbin/nft', 'usr/sbin/conntrack', 'usr/bin/tcpdump']) {
        const head = (await readFile(join(rootfs, bin))).subarray(0, 4);
        assert.deepEqual([...head], [0x7f, 0x45, 0x4c, 0x46], `${bin} is an ELF binary`);
      }
      assert.deepEqual(await readdir(join(rootfs, 'usr/local/bin')), ['node'], 'no npm, npx, corepack or yarn');
      assert.deepEqual(await readdir(join(rootfs, 'usr/local/lib/node_modules')).catch(() => []), [], 'no global npm');
      // The production dependencies of the lockfile, no development one.
      const lock = JSON.parse(await readFile(join(ROOT, 'package-lock.json'), 'utf8')) as {
        packages: Record<string, { dev?: boolean }>;
      };
      const topLevel = (dev: boolean): string[] =>
        Object.entries(lock.packages)
          .filter(([k, v]) => /^node_modules\/(@[^/]+\/)?[^/]+$/.test(k) && (v.dev === true) === dev)
          .map(([k]) => k.slice('node_modules/'.length))
          .sort();
      const installed = await packagesIn(join(rootfs, 'app/node_modules'));
      assert.deepEqual(installed, topLevel(false));
      assert.deepEqual(
        installed.filter((p) => topLevel(true).includes(p)),
        [],
      );
      assert.ok(existsSync(join(rootfs, 'app/dist/cli/main.js')));
      // The CLI by its name (`kubectl exec ... -- nft-netpol-agent denied -f`), and tcpdump's own user for --log-denied.
      const cli = await podman([
        'run',
        '--rm',
        '--network',
        'none',
        '--entrypoint',
        'nft-netpol-agent',
        image,
        'denied',
        '--help',
      ]);
      assert.match(cli.stdout, /^Usage: nft-netpol-agent denied/);
      assert.match(await readFile(join(rootfs, 'etc/passwd'), 'utf8'), /^tcpdump:/m);
      // The build lent npm its CA trust through a mount over /root: nothing of it stays.
      assert.deepEqual((await readdir(join(rootfs, 'root'))).sort(), ['.bashrc', '.profile']);
      assert.equal(existsSync(join(rootfs, 'run/build-ca.crt')), false);

      // Masking every shell and package manager (as the agent tests below run the image) does take them away:
      // the image does have /bin/sh, and with the masks it cannot be run.
      const masked = await shellsAndPackageManagers(rootfs);
      const sh = (await realpath(join(rootfs, 'bin/sh'))).slice(rootfs.length);
      for (const p of [sh, '/usr/bin/bash', '/usr/bin/apt-get', '/usr/bin/dpkg']) assert.ok(masked.includes(p), `${p} is masked`);
      const runSh = (extra: string[]) =>
        podman(['run', '--rm', '--network', 'none', ...extra, '--entrypoint', '/bin/sh', image, '-c', 'exit 0'], {
          reject: false,
        });
      assert.equal((await runSh([])).exitCode, 0, 'the image has a shell');
      assert.notEqual((await runSh(['--security-opt', `mask=${masked.join(':')}`])).exitCode, 0, 'masked, it cannot run');
      const layers = JSON.parse(
        (await podman(['image', 'inspect', '--format', '{{json .RootFS.Layers}}', image])).stdout,
      ) as string[];
      t.diagnostic(`${layers.length} layers; masked: ${masked.join(' ')}`);
    },
  );

  test('the CLI in the image: --help, render, explain and validate say what the source tree says', LONG, async (t) => {
    if (!requireImage(t)) return;
    const image = await buildImage();
    const cases: string[][] = [
      ['--help'],
      ['render', '--help'],
      ['render', '--node', 'node-1', '-f', 'examples/'],
      ['render', '--node', 'node-2', '-f', 'examples/'],
      ['explain', '-f', 'examples/', '--from', 'shop/cart-5c8b7', '--to', 'payments/api-0', '--port', '8443/tcp'],
      ['explain', '-f', 'examples/', '--from', 'shop/cart-5c8b7', '--to', 'payments/api-0', '--port', '8443/tcp', '-o', 'json'],
      ['validate', '-f', 'examples-invalid/'],
    ];
    for (const args of cases) {
      const [fromImage, fromSource] = await Promise.all([imageCli(image, args), sourceCli(args)]);
      assert.ok(fromSource.stdout.length > 0, `${args.join(' ')}: the source CLI prints something`);
      assert.equal(fromImage.exitCode, fromSource.exitCode, `${args.join(' ')}: exit code`);
      assert.equal(fromImage.stdout, fromSource.stdout, `${args.join(' ')}: byte-identical output`);
    }
    // The render is really a ruleset (not, say, the same usage error twice).
    assert.match((await sourceCli(cases[2]!)).stdout, /table inet nft-netpol/);
  });

  test(
    'run as the DaemonSet runs it: --from-dir, then the API server; real packets; SIGTERM keeps the ruleset',
    LONG,
    async (t) => {
      if (!requireImage(t)) return;
      const image = await buildImage();
      await sweepStaleContainers();
      const rootfs = await rootfsOf(image);
      const masks = ['--security-opt', `mask=${(await shellsAndPackageManagers(rootfs)).join(':')}`];
      const c = await Cluster.create({
        style: 'routed',
        nodes: [{ name: 'node-1' }, { name: 'node-2' }],
        pods: [
          { key: 'shop/web', node: 'node-1' },
          { key: 'shop/other', node: 'node-1' },
          { key: 'shop/db', node: 'node-1' },
          // Across the underlay: only node-1 runs the agent under test, and it isolates shop/db's ingress.
          { key: 'ext/client', node: 'node-2' },
        ],
      });
      const node = c.node('node-1');
      const dir = await mkdtemp(join(tmpdir(), 'nftnp-image-run-'));
      const containers: Container[] = [];
      const bridges: NetnsBridge[] = [];
      const cleanups: (() => Promise<void>)[] = [];
      t.after(async () => {
        for (const ct of containers) await ct.remove();
        for (const b of bridges) b.stop();
        for (const f of cleanups) await f();
        await c.destroy();
        await rm(dir, { recursive: true, force: true });
      });

      const ds: DaemonSetRun = await daemonSetRun('node-1');
      // The agent's listeners (METRICS_ADDR, DEBUG_ADDR of the DaemonSet) inside the node namespace, for the test process.
      const port = (addr: string | undefined): number => Number(/:(\d+)$/.exec(addr ?? '')?.[1]);
      const metricsSock = join(dir, 'metrics.sock');
      const debugSock = join(dir, 'debug.sock');
      bridges.push(
        await NetnsBridge.start(node.netns, {
          [`unix:${metricsSock}`]: `tcp:127.0.0.1:${port(ds.env['METRICS_ADDR'])}`,
          [`unix:${debugSock}`]: `tcp:127.0.0.1:${port(ds.env['DEBUG_ADDR'])}`,
        }),
      );
      const get = (sock: string, path: string): Promise<{ status: number; body: string }> =>
        new Promise((resolve, reject) => {
          const req = http.get({ socketPath: sock, path, timeout: 10_000 }, (res) => {
            let body = '';
            res.setEncoding('utf8').on('data', (d: string) => (body += d));
            res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
          });
          req.on('timeout', () => req.destroy(new Error('timeout')));
          req.on('error', reject);
        });
      const waitReady = async (ct: Container): Promise<void> => {
        await eventually(
          'agent /readyz',
          async () => {
            if (!ct.running()) throw new Error(`agent exited:\n${ct.tail()}`);
            return (await get(metricsSock, '/readyz').catch(() => ({ status: 0 }))).status === 200;
          },
          60_000,
        ).catch((e: unknown) => assert.fail(`${String(e)}\n--- agent ---\n${ct.tail()}`));
      };
      const start = (role: string, flags: readonly string[], extraArgs: readonly string[]): Container => {
        const envFlags = Object.entries(ds.env).flatMap(([k, v]) => ['--env', `${k}=${v}`]);
        const ct = Container.start(
          containerName(role),
          [...ds.flags, '--network', `ns:/run/netns/${node.netns}`, ...masks, ...envFlags, ...flags],
          image,
          [...ds.args, ...extraArgs],
        );
        containers.push(ct);
        return ct;
      };
      const tcp80 = (from: string, to: string, allowed: boolean, why: string): Expectation => ({
        probe: { from, to, protocol: 'TCP', port: 80, family: 4, via: 'pod' },
        allowed,
        why,
      });
      const expectProbes = async (step: string, ct: Container, exps: Expectation[]): Promise<void> => {
        let last: string[] = [];
        try {
          await eventually(
            step,
            async () => {
              last = await checkProbes(c, exps);
              return last.length === 0;
            },
            30_000,
          );
        } catch {
          assert.fail(`${step}:\n${last.join('\n')}\n--- agent ---\n${ct.tail()}`);
        }
      };
      const stopWithinGrace = async (ct: Container): Promise<void> => {
        const before = await listTableIn(node.netns);
        assert.ok(before !== undefined, 'the agent programmed its table in the node namespace');
        const code = await ct.stop(ds.graceSeconds);
        // 0 is the agent's own exit after SIGTERM; without tini forwarding it, podman would SIGKILL (137) after the grace period.
        assert.equal(code, 0, `exit code after SIGTERM:\n${ct.tail()}`);
        assert.ok(
          ct.lines.some((l) => l['event'] === 'stop' && l['signal'] === 'SIGTERM'),
          `the agent saw SIGTERM:\n${ct.tail()}`,
        );
        assert.equal(await listTableIn(node.netns), before, 'the ruleset stays in force after the agent exits');
      };

      const podObj = (key: string, name: string, labels: Record<string, string>): KubeObject => {
        const p = c.pod(key);
        return pod(p.namespace, name, labels, p.node, p.ips.v4, { ips: [p.ips.v4, p.ips.v6] });
      };
      const objects: KubeObject[] = [
        namespace('shop'),
        namespace('ext'),
        ...c.nodeObjects().map((n) => structuredClone(n) as KubeObject),
        podObj('shop/web', 'web', { app: 'web' }),
        podObj('shop/other', 'other', { app: 'other' }),
        podObj('shop/db', 'db', { app: 'db' }),
        podObj('ext/client', 'client', { app: 'client' }),
      ];
      const dbFromWeb = networkPolicy('shop', 'db-from-web', {
        podSelector: { matchLabels: { app: 'db' } },
        ingress: [{ from: [{ podSelector: { matchLabels: { app: 'web' } } }], ports: [{ port: 80 }] }],
      });
      const isolated = [
        tcp80('shop/web', 'shop/db', true, 'app=web allowed'),
        tcp80('shop/other', 'shop/db', false, 'app=other not allowed'),
        tcp80('ext/client', 'shop/db', false, 'other namespace not allowed'),
        tcp80('shop/db', 'shop/web', true, 'web is not isolated'),
      ];

      await t.test('--from-dir: enforces the manifests, follows a change, SIGTERM through tini', async () => {
        const manifests = join(dir, 'manifests');
        await mkdir(manifests);
        await writeFile(join(manifests, 'cluster.json'), JSON.stringify({ apiVersion: 'v1', kind: 'List', items: objects }));
        await writeFile(join(manifests, 'policy.json'), JSON.stringify(dbFromWeb));
        const ct = start('from-dir', ['--volume', `${manifests}:/manifests:ro`], ['--from-dir', '/manifests']);
        await waitReady(ct);
        await expectProbes('policy from the directory', ct, isolated);
        await writeFile(
          join(manifests, 'policy.json'),
          JSON.stringify(
            networkPolicy('shop', 'db-from-web', {
              podSelector: { matchLabels: { app: 'db' } },
              ingress: [{ from: [{ podSelector: { matchLabels: { app: 'other' } } }], ports: [{ port: 80 }] }],
            }),
          ),
        );
        await expectProbes('policy changed in the directory', ct, [
          tcp80('shop/web', 'shop/db', false, 'app=web no longer allowed'),
          tcp80('shop/other', 'shop/db', true, 'app=other allowed now'),
        ]);
        await stopWithinGrace(ct);
        await expectProbes('after the agent exited, the last ruleset still enforces', ct, [
          tcp80('shop/web', 'shop/db', false, 'still isolated'),
          tcp80('shop/other', 'shop/db', true, 'still allowed'),
        ]);
      });

      await t.test(
        'API server through the in-cluster service account: syncs, serves /metrics /healthz /readyz, SIGTERM keeps the ruleset',
        async () => {
          const token = 'image-test-token';
          const api = await FakeApiServer.start({ token, bookmarkIntervalMs: 0 });
          cleanups.push(() => api.close());
          api.load(objects.map((o) => structuredClone(o)));
          api.create('networkpolicies', structuredClone(dbFromWeb));
          // The API server as a pod sees it in-cluster: https on port 443 (of the node's address here), its certificate
          // signed by the service account's ca.crt. TLS ends in the test process, in front of the test API server.
          const sa = join(dir, 'serviceaccount');
          await mkdir(sa);
          const [key, cert] = [join(dir, 'apiserver.key'), join(sa, 'ca.crt')];
          await execa('openssl', [
            'req',
            '-x509',
            '-newkey',
            'ec',
            '-pkeyopt',
            'ec_paramgen_curve:prime256v1',
            '-nodes',
            '-days',
            '1',
            '-subj',
            '/CN=kubernetes',
            '-addext',
            `subjectAltName=IP:${node.addresses.v4}`,
            '-keyout',
            key,
            '-out',
            cert,
          ]);
          const apiSock = join(dir, 'api.sock');
          const relay = tls.createServer({ key: await readFile(key), cert: await readFile(cert) }, (s) => {
            const up = net.connect({ host: '127.0.0.1', port: api.port });
            s.pipe(up).pipe(s);
            s.on('error', () => up.destroy());
            up.on('error', () => s.destroy());
          });
          await new Promise<void>((resolve) => relay.listen(apiSock, resolve));
          cleanups.push(() => new Promise<void>((resolve) => relay.close(() => resolve())));
          bridges.push(await NetnsBridge.start(node.netns, { [`tcp:${node.addresses.v4}:443`]: `unix:${apiSock}` }));
          assert.ok(ds.serviceAccountDir !== undefined, 'the DaemonSet mounts its service account token');
          await writeFile(join(sa, 'token'), token);
          await writeFile(join(sa, 'namespace'), 'nft-netpol-system');
          const ct = start(
            'apiserver',
            [
              '--volume',
              `${sa}:${ds.serviceAccountDir}:ro`,
              '--env',
              `KUBERNETES_SERVICE_HOST=${node.addresses.v4}`,
              '--env',
              'KUBERNETES_SERVICE_PORT=443',
            ],
            [],
          );
          await waitReady(ct);
          await expectProbes('policies from the API server', ct, isolated);
          assert.ok(
            ct.lines.some((l) => l['event'] === 'apiserver' && l['server'] === `https://${node.addresses.v4}:443`),
            ct.tail(),
          );
          // Under the DaemonSet's read-only root filesystem, nft's scripts still go through private files in /dev/shm.
          assert.ok(
            !ct.lines.some((l) => l['event'] === 'preflight' && String(l['msg']).startsWith('nft scripts go through pipes')),
            `the container could not write private files:\n${ct.tail()}`,
          );
          assert.ok(
            api.requests.some((r) => r.watch && r.status === 200),
            'the agent watches',
          );
          assert.ok(
            api.requests.every((r) => r.status !== 401),
            'every request carried the service account token',
          );
          const metrics = await get(metricsSock, '/metrics');
          assert.equal(metrics.status, 200);
          assert.equal(metricFrom(metrics.body, 'nftnp_in_sync'), 1, metrics.body.slice(0, 2000));
          assert.equal((await get(metricsSock, '/healthz')).status, 200);
          assert.equal((await get(metricsSock, '/readyz')).status, 200);
          assert.equal((await get(debugSock, '/readyz')).status, 200, 'the debug listener answers on the node loopback');

          api.patchLabels('namespaces', undefined, 'ext', { team: 'blue' });
          api.update(
            'networkpolicies',
            networkPolicy('shop', 'db-from-web', {
              podSelector: { matchLabels: { app: 'db' } },
              ingress: [{ from: [{ namespaceSelector: { matchLabels: { team: 'blue' } } }], ports: [{ port: 80 }] }],
            }),
          );
          await expectProbes('policy and namespace changed through the API', ct, [
            tcp80('ext/client', 'shop/db', true, 'ext has team=blue'),
            tcp80('shop/web', 'shop/db', false, 'shop has no team=blue'),
          ]);
          await stopWithinGrace(ct);
          await expectProbes('after the agent exited, the last ruleset still enforces', ct, [
            tcp80('ext/client', 'shop/db', true, 'still allowed'),
            tcp80('shop/web', 'shop/db', false, 'still isolated'),
          ]);
        },
      );
    },
  );
});
