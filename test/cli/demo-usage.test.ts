// `npm run demo` as a user meets it (issue #21, item 13): flag mistakes are
// usage errors (exit 2, no stack trace), before it needs root; --help says
// what it does.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const DEMO = join(ROOT, 'scripts/demo.ts');

test('demo: unknown flags and bad values are usage errors, without a stack trace', () => {
  const cases: [string[], RegExp][] = [
    [['--bogus'], /^usage error: Unknown option '--bogus'/],
    [['--ports', 'TCP/x'], /^usage error: --ports: "TCP\/x" is not PROTOCOL\/PORT/],
    [['--ports', 'ICMP/1'], /^usage error: --ports: "ICMP\/1"/],
    [['--style', 'mesh'], /^usage error: --style must be routed or bridged/],
    [['--deny', 'maybe'], /^usage error: --deny must be drop or reject/],
  ];
  for (const [args, re] of cases) {
    const r = spawnSync(process.execPath, [DEMO, ...args], { cwd: ROOT, encoding: 'utf8' });
    assert.equal(r.status, 2, args.join(' '));
    assert.match(r.stderr, re, args.join(' '));
    assert.doesNotMatch(r.stderr, /\n\s+at /, 'no stack trace');
    assert.equal(r.stdout, '');
  }
  const help = spawnSync(process.execPath, [DEMO, '--help'], { cwd: ROOT, encoding: 'utf8' });
  assert.equal(help.status, 0);
  assert.match(help.stdout, /^usage: npm run demo -- /);
});
