// Every script under scripts/ that takes options answers --help with its
// header comment (exit 0) and a mistyped option with a usage error (exit 2),
// not a stack trace. Without the handling, parseArgs itself throws on both,
// so a failing run never starts a benchmark.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { execa } from 'execa';
import { headerComment } from '../../scripts/script-args.ts';

const SCRIPTS = new URL('../../scripts/', import.meta.url).pathname;
const withOptions = readdirSync(SCRIPTS)
  .filter((f) => f.endsWith('.ts'))
  .filter((f) => readFileSync(join(SCRIPTS, f), 'utf8').includes('scriptArgs(import.meta.url'))
  .sort();

test('the benchmark scripts take their options through scriptArgs', () => {
  for (const f of ['bench-agent.ts', 'bench-compile-change.ts', 'bench-peer-lookup.ts', 'gen-cluster.ts', 'soak.ts'])
    assert.ok(withOptions.includes(f), f);
});

test('--help prints the header comment and exits 0; an unknown option exits 2 with the reason', async () => {
  for (const f of withOptions) {
    const file = join(SCRIPTS, f);
    const help = await execa(process.execPath, [file, '--help'], { reject: false, timeout: 60_000 });
    assert.equal(help.exitCode, 0, `${f}: ${help.stderr}`);
    const header = headerComment(readFileSync(file, 'utf8'));
    assert.ok(header.length > 40, `${f} has a header comment`);
    assert.equal(help.stdout, header, f);
  }
  const bad = await execa(process.execPath, [join(SCRIPTS, 'gen-cluster.ts'), '--no-such-option'], {
    reject: false,
    timeout: 60_000,
  });
  assert.equal(bad.exitCode, 2);
  assert.match(bad.stderr, /^usage error: Unknown option '--no-such-option'/);
  assert.doesNotMatch(bad.stderr, /at parseArgs|node:internal/);
});
