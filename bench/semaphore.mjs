// A name taken N at a time across two isolates: two package instances in one Node process (the
// ESM and the CommonJS entry: two wasm instances and lock cores) over one MemoryStore, with the
// store's `changed` (wake-ups) and without (polls). Each instance runs `holders` callers that
// take the name with `withLock({ concurrency })`, hold it `holdMs`, and call again at once, for
// `seconds`. Prints the turns a second beside the ceiling (N turns per `holdMs`: no store, no
// wait between holders), a caller's wait for a slot (p50, p99, max), and the store calls per
// turn — at concurrency 3, and at 1 (a mutex) for comparison.
//
//   node bench/semaphore.mjs [--seconds N] [--holders N] [--hold-ms N]
//
// Not a test: it asserts nothing about speed.
import { createRequire } from 'node:module';
import { setTimeout as sleep } from 'node:timers/promises';

import * as a from 'keyturn';
import { countingStore } from '../tests/js/counting-store.mjs';
import { quantile } from '../tests/js/busy-key.mjs';
import { numberOption } from './runtimes/options.mjs';

const b = createRequire(import.meta.url)('keyturn');
const seconds = numberOption('seconds', 5);
const holders = numberOption('holders', 6);
const holdMs = numberOption('hold-ms', 5);



async function run(n, tells) {
  const store = countingStore(tells);
  const waits = [];
  let turns = 0;
  let stop = false;
  const caller = async (api, name) => {
    while (!stop) {
      const asked = performance.now();
      await api.withLock(
        store,
        name,
        async () => {
          waits.push(performance.now() - asked);
          turns += 1;
          await sleep(holdMs);
        },
        { concurrency: n, waitMs: 10_000 },
      );
    }
  };
  const name = `sem-${n}-${tells}`;
  const started = performance.now();
  const running = [a, b].flatMap((api) => Array.from({ length: holders }, () => caller(api, name)));
  await sleep(seconds * 1000);
  stop = true;
  await Promise.all(running);
  const elapsed = (performance.now() - started) / 1000;
  const ceiling = (n * 1000) / holdMs;
  return { turnsPerS: turns / elapsed, ceiling, p50: quantile(waits, 0.5), p99: quantile(waits, 0.99), max: quantile(waits, 1), callsPerTurn: store.calls / turns };
}

console.log(`a name taken N at a time by 2 instances × ${holders} callers, holding ${holdMs} ms, ${seconds} s each, node ${process.version}`);
console.log('');
console.log('N  store                 turns/s  ceiling  × ceiling  wait p50 ms  p99 ms  max ms  calls/turn');
for (const n of [3, 1]) {
  for (const tells of [true, false]) {
    const r = await run(n, tells);
    const store = tells ? 'MemoryStore, wake-ups' : 'MemoryStore, polls';
    console.log(
      `${String(n).padEnd(3)}${store.padEnd(22)}${r.turnsPerS.toFixed(0).padStart(7)}  ${r.ceiling.toFixed(0).padStart(7)}  ${(r.turnsPerS / r.ceiling).toFixed(2).padStart(9)}  ${r.p50.toFixed(2).padStart(11)}  ${r.p99.toFixed(2).padStart(6)}  ${r.max.toFixed(2).padStart(6)}  ${r.callsPerTurn.toFixed(2).padStart(10)}`,
    );
  }
}
