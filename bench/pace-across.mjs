// A pace across isolates, as users pay for it: store calls per start (billed per request on
// Durable Objects, DynamoDB, Upstash) with `rate` and without, for the same works, and how close
// the starts come to the ideal. Two package instances in this process (the ESM entry and the
// CommonJS one, each its own wasm instance, as two isolates would be) over one MemoryStore, whose
// calls are counted as any store's would be (lockStats). Each caller awaits its own result.
//
// Rows: a key one isolate keeps busy (every work from A), and a key both isolates call (works
// alternating between A and B), at `concurrency` 1 (the starts in the key's lease record) and 2
// (in a pace record of their own). Calls are counted apart on the leases' records and on the pace
// record. A paced key is held longer (the same works spread over the pace), and a lease held
// longer is renewed more: so beside the same works unpaced, the same works unpaced but each as
// long as the pace spaces them (period ÷ limit × concurrency), which hold the key as long.
//
//   node bench/pace-across.mjs [--works N]
//
// Not a test: it asserts nothing about speed.
import { createRequire } from 'node:module';
import { setTimeout as sleep } from 'node:timers/promises';

import * as a from 'keyturn';

import { countingStore } from '../tests/js/counting-store.mjs';

import { numberOption } from './runtimes/options.mjs';

const b = createRequire(import.meta.url)('keyturn');
const works = numberOption('works', 40);
const RATE = { limit: 4, periodMs: 200 };
const WORK_MS = 5;

/** `works` works of one key over a fresh store, from A only or alternating A and B. */
async function run({ both, concurrency, rate, workMs = WORK_MS }) {
  const inner = countingStore(true);
  let paceCalls = 0;
  // The same store, the calls on the pace record counted apart.
  const onPace = (key) => key.startsWith('keyturn:pace:') && paceCalls++;
  const store = {
    create: (key, value) => (onPace(key), inner.create(key, value)),
    read: (key) => (onPace(key), inner.read(key)),
    replace: (key, version, value) => (onPace(key), inner.replace(key, version, value)),
    changed: (key, version, ms) => (onPace(key), inner.changed(key, version, ms)),
  };
  const isolates = (both ? [a, b] : [a]).map((k) => k.createKeyedSerializer({ store, timeoutMs: 30_000, concurrency, ...(rate ? { rate: RATE } : {}) }));
  const starts = [];
  const t0 = performance.now();
  await Promise.all(Array.from({ length: works }, (_, i) => isolates[i % isolates.length]('k', async () => {
    starts.push(performance.now() - t0);
    await sleep(workMs);
  })));
  starts.sort((x, y) => x - y);
  return { leases: inner.calls - paceCalls, pace: paceCalls, last: starts[starts.length - 1] };
}

console.log(`${works} works of one key, each ${WORK_MS} ms, rate ${RATE.limit} per ${RATE.periodMs} ms (ideal: the last starts at ${((Math.ceil(works / RATE.limit) - 1) * RATE.periodMs).toFixed(0)} ms)\n`);
console.log('| key | concurrency | lease calls: unpaced | unpaced, held as long | paced | pace record calls per paced start | last paced start, ms |');
console.log('| --- | --- | ---: | ---: | ---: | ---: | ---: |');
for (const concurrency of [1, 2]) {
  for (const both of [false, true]) {
    const plain = await run({ both, concurrency, rate: false });
    const spread = await run({ both, concurrency, rate: false, workMs: (RATE.periodMs / RATE.limit) * concurrency });
    const paced = await run({ both, concurrency, rate: true });
    console.log(`| ${both ? 'both isolates call it' : 'one isolate keeps it busy'} | ${concurrency} | ${plain.leases} | ${spread.leases} | ${paced.leases} | ${(paced.pace / works).toFixed(2)} | ${paced.last.toFixed(0)} |`);
  }
}
