// `npm run fuzz:datapath -- --runs 200 [--seed N] [--style routed|bridged|both] [--max-probes N] [--save NAME]`
// Runs the differential datapath fuzzer outside the test runner (as root). On
// a mismatch it prints the shrunk reproduction; --save writes it to
// test/datapath/regressions/NAME.yaml, which regressions.test.ts replays.
import { writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { Cluster, NETWORK_STYLES } from './cluster.ts';
import type { NetworkStyle } from './cluster.ts';
import { fuzz, fuzzClusterSpec } from './fuzz.ts';
import { REGRESSIONS_DIR } from './regression.ts';
import { missingRequirements } from './requirements.ts';

const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: '50' },
    seed: { type: 'string' },
    style: { type: 'string', default: 'both' },
    'max-probes': { type: 'string' },
    save: { type: 'string' },
  },
});
const missing = missingRequirements();
if (missing.length > 0) {
  console.error(`fuzz:datapath needs: ${missing.join('; ')}`);
  process.exit(2);
}
const runs = Number(values.runs);
const seed = values.seed === undefined ? Date.now() % 2 ** 31 : Number(values.seed);
const styles: readonly NetworkStyle[] = values.style === 'both' ? NETWORK_STYLES : [values.style as NetworkStyle];
if (!Number.isInteger(runs) || runs < 1 || !Number.isInteger(seed) || styles.some((s) => !NETWORK_STYLES.includes(s))) {
  console.error('usage: fuzz:datapath [--runs N] [--seed N] [--style routed|bridged|both] [--max-probes N] [--save NAME]');
  process.exit(2);
}

let failed = false;
for (const style of styles) {
  const t0 = Date.now();
  const c = await Cluster.create(fuzzClusterSpec(style));
  try {
    console.log(`${style}: seed ${seed}, ${runs} runs`);
    const report = await fuzz(c, {
      seed,
      runs,
      ...(values['max-probes'] === undefined ? {} : { maxProbes: Number(values['max-probes']) }),
      onRun: (r, n) => {
        if (n % 10 === 0 || r.mismatches.length > 0)
          process.stdout.write(
            `  run ${n}: ${r.probes} probes${r.mismatches.length > 0 ? `, ${r.mismatches.length} MISMATCH(ES) (shrinking)` : ''}\n`,
          );
      },
    });
    console.log(`${style}: ${report.summary} (${((Date.now() - t0) / 1000).toFixed(1)} s)`);
    if (!report.ok) {
      failed = true;
      if (report.reproduction !== undefined) {
        console.log(`\n---- reproduction ----\n${report.reproduction}`);
        if (values.save !== undefined) {
          const file = new URL(`${values.save.replace(/[^A-Za-z0-9._-]/g, '_')}-${style}.yaml`, REGRESSIONS_DIR);
          writeFileSync(file, report.reproduction);
          console.log(`saved ${file.pathname}`);
        }
      }
    }
  } finally {
    await c.destroy();
  }
}
process.exit(failed ? 1 : 0);
