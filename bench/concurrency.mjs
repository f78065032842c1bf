// N at a time per key: keyturn's `concurrency` beside the floor (a per-key counter and FIFO in
// plain JS with one AbortController per work: no deadline) and the libraries users pick instead, keyed (p-limit,
// async-sema; see runtimes/semaphore-peers.mjs) — each in its own process, alternating, on
// 100 000 works over 1 key and over 1000 keys at concurrency 4. Every caller awaits its own
// result; the works are `async () => {}`. Prints works/s (median over processes and rounds),
// cold (a fresh process's first round) and warm, with the ratio to the floor.
//
//   node bench/concurrency.mjs [--processes N] [--rounds N] [--works N] [--n N]
//
// Not a test: it asserts nothing about speed.
import { execFileSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { median, numberOption } from './runtimes/options.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const processes = numberOption('processes', 5);
const rounds = numberOption('rounds', 5);
const works = numberOption('works', 100000);
const n = numberOption('n', 4);
const impls = ['keyturn', 'floor', 'p-limit', 'async-sema'];


console.log(`N at a time per key (concurrency ${n}), ${works} works per round, ${processes} processes × (1 cold + ${rounds} warm) rounds, node ${process.version}`);
console.log('every caller awaits its own result; works are async () => {}');
console.log('');
console.log('keys    implementation   cold works/s  × floor    warm works/s  × floor');
for (const keys of [1, 1000]) {
  const cold = Object.fromEntries(impls.map((impl) => [impl, []]));
  const warm = Object.fromEntries(impls.map((impl) => [impl, []]));
  for (let p = 0; p < processes; p++) {
    for (const impl of impls) {
      const out = execFileSync(process.execPath, [join(here, 'concurrency-one.mjs'), impl, String(keys), String(works), String(rounds), String(n)], { encoding: 'utf8' });
      const result = JSON.parse(out);
      cold[impl].push(result.cold);
      warm[impl].push(...result.perSecond);
    }
  }
  const c = Object.fromEntries(impls.map((impl) => [impl, median(cold[impl])]));
  const w = Object.fromEntries(impls.map((impl) => [impl, median(warm[impl])]));
  for (const impl of impls) {
    console.log(
      `${String(keys).padEnd(7)} ${impl.padEnd(15)} ${Math.round(c[impl]).toString().padStart(13)} ${(c[impl] / c.floor).toFixed(2).padStart(8)}   ${Math.round(w[impl]).toString().padStart(13)} ${(w[impl] / w.floor).toFixed(2).padStart(8)}`,
    );
  }
}
