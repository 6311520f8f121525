// SYSTEM_TIMERS: 0 ms runs right after the current I/O callbacks (before a
// setTimeout(0) of the same callback), and every handle can be cleared.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { SYSTEM_TIMERS } from '../../src/agent/ports.ts';

test('0 ms: after the I/O callbacks of this loop turn, before a setTimeout(0) set at the same time', async () => {
  await readFile(import.meta.filename);
  const order: string[] = [];
  await new Promise<void>((resolve) => {
    setTimeout(() => {
      order.push('timeout');
      resolve();
    }, 0);
    SYSTEM_TIMERS.set(() => order.push('system'), 0);
  });
  assert.deepEqual(order, ['system', 'timeout']);
});

test('cleared handles never run, of either kind', async () => {
  const ran: string[] = [];
  SYSTEM_TIMERS.clear(SYSTEM_TIMERS.set(() => ran.push('immediate'), 0));
  SYSTEM_TIMERS.clear(SYSTEM_TIMERS.set(() => ran.push('timeout'), 1));
  await new Promise((r) => setTimeout(r, 20));
  assert.deepEqual(ran, []);
});
