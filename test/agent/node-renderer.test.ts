// The agent's renderer says whether --unknown-local-endpoints drop acts: it
// needs the Node's podCIDRs, and without them new pods pass unfiltered, which
// an operator who asked for drop must learn from the log (once per change).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { nodeRenderer } from '../../src/agent/agent.ts';
import { DEFAULT_OPTIONS } from '../../src/ruleset/options.ts';
import { pod, state } from '../support/state-builder.ts';
import { captureLogger } from './fakes.ts';

const pods = [pod('a', 'web', { ips: ['10.0.1.2'] })];
const bare = state({ pods, nodes: [{ name: 'node-1', addresses: ['192.168.100.1'] }] });
const withCIDRs = state({ pods, nodes: [{ name: 'node-1', addresses: ['192.168.100.1'], podCIDRs: ['10.0.1.0/24'] }] });

test('--unknown-local-endpoints drop on a node without podCIDRs: one warning, and one line when it starts to act', () => {
  const { log, lines } = captureLogger();
  const render = nodeRenderer('node-1', { ...DEFAULT_OPTIONS, unknownLocalEndpoints: 'drop' }, log);
  const events = () => lines.filter((l) => l['event'] === 'unknown-local-endpoints');
  render(bare);
  render(bare);
  assert.equal(events().length, 1, 'once, not per apply');
  assert.equal(events()[0]?.['active'], false);
  assert.match(String(events()[0]?.['msg']), /has no effect: node node-1 has no spec\.podCIDRs/);
  assert.ok(!render(bare).text.includes('unknown local endpoint'));
  const r = render(withCIDRs);
  assert.ok(r.text.includes('unknown local endpoint'));
  assert.deepEqual(
    events().map((l) => l['active']),
    [false, true],
  );
});

test('--unknown-local-endpoints allow says nothing', () => {
  const { log, lines } = captureLogger();
  const render = nodeRenderer('node-1', DEFAULT_OPTIONS, log);
  render(bare);
  render(withCIDRs);
  assert.deepEqual(
    lines.filter((l) => l['event'] === 'unknown-local-endpoints'),
    [],
  );
});
