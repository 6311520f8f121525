import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  canonicalIP,
  formatIntervalElement,
  mergeIntervals,
  parseCIDR,
  subtractIntervals,
  cidrInterval,
  cidrContains,
  parseIP,
} from '../../src/model/ip.ts';

test('canonical IPs: v4, v6 compression, embedded v4, invalid', () => {
  const cases: [string, string | undefined][] = [
    ['10.0.0.1', '10.0.0.1'],
    ['fd00:0:0:0:0:0:0:1', 'fd00::1'],
    ['FD00::0001', 'fd00::1'],
    ['2001:db8:0:0:1:0:0:1', '2001:db8::1:0:0:1'],
    ['::ffff:1.2.3.4', '::ffff:102:304'],
    ['::', '::'],
    ['1::', '1::'],
    ['1:0:1:0:1:0:1:0', '1:0:1:0:1:0:1:0'],
    ['10.0.0.256', undefined],
    ['fe80::1%eth0', undefined],
    ['nonsense', undefined],
  ];
  for (const [input, want] of cases) assert.equal(canonicalIP(input), want, input);
});

test('CIDR parsing clears host bits and rejects garbage', () => {
  const p = parseCIDR('10.1.2.3/16');
  assert.ok(p.ok && p.cidr.prefix === 16);
  assert.ok(p.ok && cidrContains(p.cidr, parseIP('10.1.200.1')!));
  assert.ok(p.ok && !cidrContains(p.cidr, parseIP('10.2.0.1')!));
  for (const bad of ['10.0.0.0', '10.0.0.0/33', 'fd00::/129', '10.0.0.0/x', '', '300.0.0.0/8'])
    assert.equal(parseCIDR(bad).ok, false, bad);
});

test('interval subtraction and element rendering', () => {
  const c = parseCIDR('10.0.0.0/24');
  const e = parseCIDR('10.0.0.128/25');
  const x = parseCIDR('10.0.0.5/32');
  assert.ok(c.ok && e.ok && x.ok);
  const r = subtractIntervals([cidrInterval(c.cidr)], [cidrInterval(e.cidr), cidrInterval(x.cidr)]);
  assert.deepEqual(r.map(formatIntervalElement), ['10.0.0.0-10.0.0.4', '10.0.0.6-10.0.0.127']);
  const m = mergeIntervals([cidrInterval(x.cidr), { family: 4, lo: 167772166n, hi: 167772166n }]);
  assert.deepEqual(m.map(formatIntervalElement), ['10.0.0.5-10.0.0.6']);
  const whole = parseCIDR('0.0.0.0/0');
  assert.ok(whole.ok);
  assert.deepEqual([cidrInterval(whole.cidr)].map(formatIntervalElement), ['0.0.0.0/0']);
});
