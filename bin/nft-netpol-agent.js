#!/usr/bin/env node
// Runs the compiled CLI (dist/, as in the image) or, in a checkout without a
// build, the TypeScript sources directly (Node >= 22.19 strips types). Plain
// JavaScript that any Node.js runs: under an older Node (Debian's), a checkout
// re-executes itself with the locked Node (the `node` devDependency in
// node_modules), so `node bin/nft-netpol-agent.js` and `npx nft-netpol-agent`
// work whichever Node is first on PATH.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const compiled = new URL('../dist/cli/main.js', import.meta.url);
const sources = new URL('../src/cli/main.ts', import.meta.url);
const lockedNode = fileURLToPath(new URL('../node_modules/node/bin/node', import.meta.url));
const REEXEC = 'NFTNP_REEXEC';

function recentEnough() {
  const [major = 0, minor = 0] = process.versions.node.split('.').map(Number);
  return major > 22 || (major === 22 && minor >= 19);
}

if (!recentEnough() && process.env[REEXEC] === undefined && existsSync(lockedNode)) {
  const child = spawn(lockedNode, [fileURLToPath(import.meta.url), ...process.argv.slice(2)], {
    stdio: 'inherit',
    env: { ...process.env, [REEXEC]: process.version },
  });
  // The child gets what this process gets (a terminal's Ctrl-C reaches both anyway).
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(sig, () => child.kill(sig));
  child.on('error', (e) => {
    process.stderr.write(`error: cannot run ${lockedNode}: ${e.message}\n`);
    process.exit(1);
  });
  const SIGNALS = { SIGHUP: 1, SIGINT: 2, SIGPIPE: 13, SIGTERM: 15 };
  child.on('exit', (code, signal) => {
    process.exitCode = code ?? 128 + (SIGNALS[signal] ?? 0);
  });
} else if (existsSync(compiled) || recentEnough()) {
  const { runMain } = await import(existsSync(compiled) ? compiled.href : sources.href);
  await runMain(process.argv.slice(2));
} else {
  process.stderr.write(
    `error: nft-netpol-agent needs Node.js >= 22.19, this is ${process.version}; ` +
      `'npm ci' installs the locked one (node_modules/.bin/node)\n`,
  );
  process.exitCode = 1;
}
