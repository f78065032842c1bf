// The serializer inside workerd (Miniflare): 100 000 async works in one request, every caller
// awaiting its own result, over 1 key and over 1000 keys — beside `keyed-serializer.js` (the per-key
// serializer keyturn re-implements, not in this repository), bundled the same way, when
// KEYTURN_SEED names it, and two floors (a bare chain with one
// AbortController per work, and with one deadline timer per work too; see serializer-worker.mjs).
// Each sample is a fresh workerd; prints the median works/s of N samples. Then what a Worker's
// user meets: one call per request, beside the request alone.
//
//   node bench/workerd.mjs [--samples N]
//   KEYTURN_SEED=<path to keyed-serializer.js> node bench/workerd.mjs
//
// Not a test: it asserts nothing about speed. workerd's clock moves only across I/O, so each
// request's time is taken here, around the request.
import { execFileSync } from 'node:child_process';
import { rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

import { workerdWith } from '../tests/runtimes/workerd.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const args = process.argv.slice(2);
const at = args.indexOf('--samples');
const samples = at === -1 ? 5 : Number(args[at + 1]);
const seed = process.env.KEYTURN_SEED ? resolve(process.env.KEYTURN_SEED) : undefined;
const bundled = join(here, 'runtimes', 'seed-serializer.mjs');
if (seed) {
  execFileSync(join(here, '../node_modules/.bin/esbuild'), [seed, '--bundle', '--format=esm', '--platform=neutral', `--outfile=${bundled}`, '--log-level=warning']);
} else {
  // The worker imports it by name, and Miniflare loads every module a worker names: without a
  // keyed-serializer.js, one that says so if it were ever called (the seed row is not run then).
  writeFileSync(bundled, "export function createKeyedSerializer() {\n  throw new Error('no seed: set KEYTURN_SEED');\n}\n");
}
const impls = seed ? ['keyturn', 'seed', 'floor-timer', 'floor'] : ['keyturn', 'floor-timer', 'floor'];
const median = (values) => [...values].sort((a, b) => a - b)[values.length >> 1];

console.log(`serializer in workerd: 100000 async works in one request, every caller awaiting its own result; median of ${samples} fresh workerd runs`);
if (!seed) console.log('(no seed row: set KEYTURN_SEED to the path of keyed-serializer.js to add it)');
console.log('');
console.log('keys    implementation      works/s   × seed  × floor-timer');
try {
  for (const keys of [1, 1000]) {
    const rates = Object.fromEntries(impls.map((impl) => [impl, []]));
    for (let s = 0; s < samples; s++) {
      for (const impl of impls) {
        const mf = workerdWith('bench/runtimes/serializer-worker.mjs');
        await mf.dispatchFetch(`http://bench/?works=1000&keys=${keys}&impl=${impl}`); // load and warm the isolate a little
        const started = performance.now();
        const response = await mf.dispatchFetch(`http://bench/?works=100000&keys=${keys}&impl=${impl}`);
        const body = await response.json();
        const elapsed = performance.now() - started;
        await mf.dispose();
        if (body.failed || body.outOfOrder || body.overlaps) throw new Error(`${impl}: ${JSON.stringify(body)}`);
        rates[impl].push(100000 / (elapsed / 1000));
      }
    }
    for (const impl of impls) {
      const rate = median(rates[impl]);
      const ratio = seed ? (rate / median(rates.seed)).toFixed(2) : '—';
      const toFloor = (rate / median(rates['floor-timer'])).toFixed(2);
      console.log(`${String(keys).padEnd(7)} ${impl.padEnd(15)} ${Math.round(rate).toString().padStart(11)}   ${ratio.padStart(6)}  ${toFloor.padStart(11)}`);
    }
  }
  // What a Worker's user meets: one call per request. Requests on 1 key and on 1000 keys, 50 in
  // flight at once, with keyturn and with the request alone (`none`): the serializer's cost per
  // request is the difference.
  const requests = 4000;
  const inFlight = 50;
  console.log('');
  console.log(`one call per request: ${requests} requests, ${inFlight} in flight; median of ${samples} fresh workerd runs`);
  console.log('keys    implementation  requests/s   µs/request over none');
  for (const keys of [1, 1000]) {
    const rates = { keyturn: [], none: [] };
    for (let s = 0; s < samples; s++) {
      for (const impl of ['keyturn', 'none']) {
        const mf = workerdWith('bench/runtimes/serializer-worker.mjs');
        const send = (i) => mf.dispatchFetch(`http://bench/?one=object-${i % keys}&impl=${impl}`).then((response) => response.text());
        for (let i = 0; i < 200; i++) await send(i); // load and warm the isolate a little
        const started = performance.now();
        let next = 0;
        const lane = async () => {
          while (next < requests) await send(next++);
        };
        await Promise.all(Array.from({ length: inFlight }, lane));
        rates[impl].push(requests / ((performance.now() - started) / 1000));
        await mf.dispose();
      }
    }
    const keyturn = median(rates.keyturn);
    const none = median(rates.none);
    const over = (1e6 / keyturn - 1e6 / none).toFixed(1);
    console.log(`${String(keys).padEnd(7)} keyturn         ${Math.round(keyturn).toString().padStart(10)}   ${over.padStart(20)}`);
    console.log(`${String(keys).padEnd(7)} none            ${Math.round(none).toString().padStart(10)}`);
  }
} finally {
  rmSync(bundled, { force: true });
}
