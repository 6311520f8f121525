// Shared by compile and nft tests: is a real nft usable here, and does it
// accept a script? Without root/nft the tests that need it skip with the
// reason, except under CI=true where that is a failure.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { TestContext } from 'node:test';
import { probeNft, runNft } from '../../src/nft/exec.ts';

let probe: ReturnType<typeof probeNft> | undefined;

/** Why nft cannot be used, or undefined when it can. Throws under CI. */
export async function nftUnavailable(): Promise<string | undefined> {
  probe ??= probeNft();
  const p = await probe;
  if (p.ok) return undefined;
  if (process.env.CI === 'true') throw new Error(`CI=true but nft is unusable: ${p.reason}`);
  return `${p.reason}; run the tests as root with nftables installed`;
}

/** Skips the test (returning false) when nft is unusable. */
export async function haveNft(t: TestContext): Promise<boolean> {
  const why = await nftUnavailable();
  if (why === undefined) return true;
  t.skip(`needs nft: ${why}`);
  return false;
}

export async function assertNftAccepts(text: string, label: string): Promise<void> {
  const r = await runNft(text, { check: true });
  assert.ok(r.ok, `nft --check rejected ${label}: ${r.ok ? '' : r.error}\n${text.slice(0, 4000)}`);
}

/**
 * Collects every ruleset a test file renders and registers one final test
 * that runs each distinct one through `nft --check -f -`. Register it after
 * the file's other tests (node:test runs a file's tests in order).
 */
export function renderLog(): { add: (label: string, text: string) => string; registerCheck: () => void } {
  const texts = new Map<string, string>();
  const seen = new Set<string>();
  return {
    add(label, text) {
      if (!seen.has(text)) texts.set(`${label} #${texts.size}`, text);
      seen.add(text);
      return text;
    },
    registerCheck() {
      test('every ruleset rendered in this file passes nft --check', async (t) => {
        if (!(await haveNft(t))) return;
        assert.ok(texts.size > 0, 'nothing was rendered');
        for (const [label, text] of texts) await assertNftAccepts(text, label);
      });
    },
  };
}
