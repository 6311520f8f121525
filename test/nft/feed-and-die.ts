// A child for private-file.test.ts: applies the script in argv[3] to the
// namespace argv[2] with runNft, says the nft pid on stdout as soon as nft is
// spawned, and waits to be killed. --pipe: the script through a pipe, as
// before private files (to see the hazard they remove).
import { readFileSync } from 'node:fs';
import { runNft } from '../../src/nft/exec.ts';
import { usePrivateDir } from '../../src/nft/private-file.ts';

const [netns, scriptPath, mode] = process.argv.slice(2);
if (netns === undefined || scriptPath === undefined) throw new Error('usage: feed-and-die.ts NETNS SCRIPT [--pipe]');
if (mode === '--pipe') usePrivateDir('/nonexistent-dir');
const script = readFileSync(scriptPath, 'utf8');
void runNft(script, { netns, onSpawn: (pid) => process.stdout.write(`spawned ${String(pid)}\n`) });
setInterval(() => {}, 1000);
