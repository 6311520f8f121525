// The shared case machinery: truth tables (builders, printer, diff), the
// upstream model objects and applyChanges. The datapath harness relies on them.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { buildState } from '../../src/model/normalize.ts';
import { applyChanges, largeCIDRFor } from '../cases/upstream-cases.ts';
import { containerPortName, upstreamModel, UPSTREAM_PODS } from '../cases/upstream-model.ts';
import { networkPolicy } from '../cases/raw.ts';
import {
  cell,
  compareTables,
  diffTables,
  alignedTable,
  formatReport,
  observeTable,
  prettyPrint,
  Reachability,
} from '../support/truth-table.ts';

const PODS = ['x/a', 'x/b', 'y/a'];

describe('Reachability builders (upstream semantics)', () => {
  const rows: { name: string; build: (r: Reachability) => void; want: string }[] = [
    { name: 'default allow', build: () => {}, want: '...|...|...' },
    { name: 'expectAllIngress', build: (r) => r.expectAllIngress('x/a', false), want: 'X..|X..|X..' },
    { name: 'expectAllEgress', build: (r) => r.expectAllEgress('y/a', false), want: '...|...|XXX' },
    {
      name: 'expectPeer by namespace',
      build: (r) => r.expectPeer({ namespace: 'x' }, { namespace: 'y' }, false),
      want: '..X|..X|...',
    },
    {
      name: 'expectPeer by pod name across namespaces',
      build: (r) => r.expectPeer({}, { pod: 'a' }, false),
      want: 'X.X|X.X|X.X',
    },
    {
      name: 'later expectations override',
      build: (r) => r.expectAllIngress('x/a', false).expect('x/b', 'x/a', true),
      want: 'X..|...|X..',
    },
  ];
  for (const row of rows) {
    test(row.name, () => {
      const r = new Reachability(PODS);
      row.build(r);
      const t = r.table();
      const got = PODS.map((f) => PODS.map((to) => (cell(t, f, to) ? '.' : 'X')).join('')).join('|');
      assert.equal(got, row.want);
    });
  }

  test('unknown pods are an error, not a silent no-op', () => {
    assert.throws(() => new Reachability(PODS).expect('x/a', 'z/z', false), /unknown pod z\/z/);
    assert.throws(() => new Reachability(PODS).expectAllEgress('q/q', false), /unknown pod q\/q/);
  });

  test('table() is a snapshot', () => {
    const r = new Reachability(PODS);
    const before = r.table();
    r.expect('x/a', 'x/b', false);
    assert.equal(cell(before, 'x/a', 'x/b'), true);
  });
});

describe('printing and comparing', () => {
  const expected = new Reachability(PODS).expectAllIngress('x/a', false).table();
  const observed = observeTable(PODS, (f, t) => (f === 'y/a' && t === 'x/b' ? undefined : t !== 'x/a' || f === 'x/b'));

  test('prettyPrint is upstream format: tab-separated, . X ?', () => {
    assert.equal(prettyPrint(observed), ['-\tx/a\tx/b\ty/a', 'x/a\tX\t.\t.', 'x/b\t.\t.\t.', 'y/a\tX\t?\t.'].join('\n'));
  });

  test('compareTables marks mismatches X and unknowns ?', () => {
    assert.equal(
      prettyPrint(compareTables(expected, observed)),
      ['-\tx/a\tx/b\ty/a', 'x/a\t.\t.\t.', 'x/b\tX\t.\t.', 'y/a\t.\t?\t.'].join('\n'),
    );
  });

  test('diffTables lists mismatches and unknowns, skipping loopback unless asked', () => {
    assert.deepEqual(diffTables(expected, observed), [
      { from: 'x/b', to: 'x/a', expected: false, observed: true },
      { from: 'y/a', to: 'x/b', expected: true, observed: undefined },
    ]);
    const selfWrong = observeTable(PODS, (f, t) => (f === t ? true : cell(expected, f, t)));
    assert.deepEqual(diffTables(expected, selfWrong), []);
    assert.deepEqual(diffTables(expected, selfWrong, { ignoreLoopback: false }), [
      { from: 'x/a', to: 'x/a', expected: false, observed: true },
    ]);
  });

  test('formatReport has the counts and the three tables', () => {
    const out = formatReport(expected, observed, { title: 'case 1' });
    assert.match(out, /^case 1\nreachability: correct:4, incorrect:2, ignored:3, result=false\n/);
    for (const h of ['expected:', 'observed:', 'comparison:']) assert.ok(out.includes(`\n${h}\n\n-\tx/a\tx/b\ty/a\n`), h);
  });

  test('the aligned layout (the demo): a legend, numbered columns that line up with names of any length', () => {
    const long = observeTable(['x/a', 'kube-system/coredns-5d78c'], (f, t) => (f === t ? undefined : f === 'x/a'));
    assert.equal(
      alignedTable(long),
      ['  from \\ to                  1  2', '1 x/a                        ?  .', '2 kube-system/coredns-5d78c  X  ?'].join('\n'),
    );
    const out = formatReport(expected, observed, { layout: 'aligned' });
    assert.match(out, /^legend: \. connected {3}X blocked {3}\? not probed/m);
    assert.match(out, /^comparison \(\. same, X different, \? not probed\):$/m);
    // Every row of a table is as long as its header: the columns line up.
    for (const table of out.split('\n\n').filter((b) => b.includes('from \\ to'))) {
      const widths = new Set(table.split('\n').map((l) => l.length));
      assert.equal(widths.size, 1, table);
    }
  });

  test('tables over different pods cannot be compared', () => {
    const other = new Reachability(['x/a']).table();
    assert.throws(() => diffTables(expected, other), /different pods/);
  });
});

describe('upstream model objects', () => {
  test('3 namespaces and 9 pods, valid, with upstream labels and named ports', () => {
    const m = upstreamModel();
    const { state, errors } = buildState([...m.namespaces, ...m.pods]);
    assert.deepEqual(errors, []);
    assert.deepEqual(
      state.pods.map((p) => `${p.namespace}/${p.name}`),
      [...UPSTREAM_PODS],
    );
    assert.deepEqual(state.namespaces.find((n) => n.name === 'y')?.labels, { 'kubernetes.io/metadata.name': 'y', ns: 'y' });
    const xb = state.pods.find((p) => p.namespace === 'x' && p.name === 'b');
    assert.deepEqual(xb?.labels, { pod: 'b' });
    assert.deepEqual(xb?.ips, ['10.244.1.11', 'fd00:10:244:1::11']);
    assert.deepEqual(xb?.ports.map((p) => `${p.name} ${p.port}/${p.protocol}`).sort(), [
      'serve-80-sctp 80/SCTP',
      'serve-80-tcp 80/TCP',
      'serve-80-udp 80/UDP',
      'serve-81-sctp 81/SCTP',
      'serve-81-tcp 81/TCP',
      'serve-81-udp 81/UDP',
    ]);
    assert.equal(containerPortName(81, 'UDP'), 'serve-81-udp');
  });

  test('addresses and nodes come from the callbacks; v6 is optional', () => {
    const m = upstreamModel({
      podIPs: (ns, p) => ({ v4: `192.0.2.${ns.charCodeAt(0) - 110 + p.charCodeAt(0)}` }),
      nodeName: (ns) => `node-${ns}`,
    });
    const { state, errors } = buildState([...m.pods]);
    assert.deepEqual(errors, []);
    const za = state.pods.find((p) => p.namespace === 'z' && p.name === 'a');
    assert.deepEqual([za?.ips, za?.nodeName], [['192.0.2.109'], 'node-z']);
  });

  test('largeCIDRFor is the /4 around an address', () => {
    assert.equal(largeCIDRFor('10.244.1.11'), '0.0.0.0/4');
    assert.equal(largeCIDRFor('172.16.0.1'), '160.0.0.0/4');
    assert.equal(largeCIDRFor('fd00:10:244:1::11'), 'f000::/4');
  });
});

describe('applyChanges', () => {
  const m = upstreamModel();
  const base = [...m.namespaces, ...m.pods];
  const p = (name: string, ingress: readonly object[]) => networkPolicy('x', name, { podSelector: {}, ingress });

  test('upsert replaces by namespace/name, delete removes', () => {
    const a = applyChanges(base, [
      { type: 'upsertPolicy', policy: p('p', []) },
      { type: 'upsertPolicy', policy: p('p', [{}]) },
    ]);
    const pols = a.filter((o) => o.kind === 'NetworkPolicy');
    assert.equal(pols.length, 1);
    assert.deepEqual((pols[0]?.spec as { ingress: unknown[] }).ingress, [{}]);
    assert.equal(
      applyChanges(a, [{ type: 'deletePolicy', namespace: 'x', name: 'p' }]).some((o) => o.kind === 'NetworkPolicy'),
      false,
    );
  });

  test('labels merge, null removes, the input is not modified', () => {
    const a = applyChanges(base, [
      { type: 'labelPod', namespace: 'x', name: 'a', labels: { target: 'isolated' } },
      { type: 'labelNamespace', name: 'y', labels: { ns: null, ns2: 'updated' } },
    ]);
    assert.deepEqual(
      a.find((o) => o.kind === 'Pod' && o.metadata.namespace === 'x' && o.metadata.name === 'a')?.metadata.labels,
      { pod: 'a', target: 'isolated' },
    );
    assert.deepEqual(a.find((o) => o.kind === 'Namespace' && o.metadata.name === 'y')?.metadata.labels, {
      'kubernetes.io/metadata.name': 'y',
      ns2: 'updated',
    });
    assert.deepEqual(base.find((o) => o.kind === 'Pod' && o.metadata.name === 'a')?.metadata.labels, { pod: 'a' });
  });

  test('changing what does not exist throws', () => {
    assert.throws(() => applyChanges(base, [{ type: 'deletePolicy', namespace: 'x', name: 'nope' }]), /no NetworkPolicy x\/nope/);
    assert.throws(() => applyChanges(base, [{ type: 'labelPod', namespace: 'q', name: 'a', labels: {} }]), /no Pod q\/a/);
  });
});
