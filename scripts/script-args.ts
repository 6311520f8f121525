// Command-line options of the scripts under scripts/: node:util's parseArgs,
// with `--help` / `-h` printing the script's header comment (its usage) and
// a mistyped option a usage error (exit 2) instead of a stack trace.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseArgs, type ParseArgsConfig } from 'node:util';

/** The leading `//` comment block of a source file, without the slashes. */
export function headerComment(text: string): string {
  const lines: string[] = [];
  for (const line of text.split('\n')) {
    if (!line.startsWith('//')) break;
    lines.push(line.replace(/^\/\/ ?/, ''));
  }
  return lines.join('\n');
}

/** parseArgs(config) for the script at `url` (its import.meta.url); exits on --help and on bad options. */
export function scriptArgs<T extends ParseArgsConfig>(url: string, config: T): ReturnType<typeof parseArgs<T>> {
  const argv = config.args ?? process.argv.slice(2);
  const end = argv.indexOf('--');
  const own = end < 0 ? argv : argv.slice(0, end);
  const file = fileURLToPath(url);
  if (own.includes('--help') || own.includes('-h')) {
    process.stdout.write(`${headerComment(readFileSync(file, 'utf8'))}\n`);
    process.exit(0);
  }
  try {
    return parseArgs<T>(config);
  } catch (e) {
    process.stderr.write(`usage error: ${e instanceof Error ? e.message : String(e)}\n(see: node ${file} --help)\n`);
    process.exit(2);
  }
}
