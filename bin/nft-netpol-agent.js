#!/usr/bin/env node
// Runs the compiled CLI (dist/, as in the image) or, in a checkout without a
// build, the TypeScript sources directly (Node >= 22.18 strips types).
import { existsSync } from 'node:fs';
const compiled = new URL('../dist/cli/main.js', import.meta.url);
const { main } = await import(existsSync(compiled) ? compiled.href : new URL('../src/cli/main.ts', import.meta.url).href);
process.exitCode = await main(process.argv.slice(2));
