// A pace per key (`rate`) against the peers users build it from (runtimes/pace-peers.mjs:
// Bottleneck groups, p-queue per key), in one Node isolate. Each caller awaits its own result.
// Two shapes of load on `keys` keys, each at 5 starts per 200 ms, first one at a time with a
// short work (5 ms), then 2 at a time with a work of 30–80 ms (an upstream call):
// - saturated: `callers` callers per key, each calling again as soon as its call settles, for
//   `seconds` — the starts per second per key a limiter achieves, against the ideal limit/period;
// - bursts: `limit` calls at once on a key, at gaps drawn from [period/2, 2·period] (on average
//   80 % of the pace), for `seconds` — where a window reset on a fixed schedule lets a burst at
//   its end and one at the next one's start through together.
// For each, from the start times each work read with performance.now() as it was called: the
// shortest span holding `limit + 1` starts of one key (at least `periodMs` when no window of
// `periodMs` ever held more than `limit`), and the most starts of one key in any window of
// `periodMs - CLOCK_MS` sliding over them, against `limit` (CLOCK_MS allows for clocks read in
// whole ms and timers that fire up to a ms early: a burst let through at a fixed window's edge
// counts the same either way); the most of a key at once; a call's wait for its start (p50, p99); the process's CPU time per work
// (user + system, the harness's own timers and sleeps included, the same for every row).
//
//   node bench/pace.mjs [--seconds N] [--keys N] [--callers N] [--only NAME]
//
// Not a test: it asserts nothing about speed.
import { setTimeout as sleep } from 'node:timers/promises';

import { quantile } from '../tests/js/busy-key.mjs';
import { numberOption, option } from './runtimes/options.mjs';
import { pacePeers } from './runtimes/pace-peers.mjs';

const seconds = numberOption('seconds', 4);
const keyCount = numberOption('keys', 8);
const callers = numberOption('callers', 10);
const only = option('only', '');

const CLOCK_MS = 2;

const configs = [
  { name: '5 per 200 ms, one at a time, works of 5 ms', pace: { limit: 5, periodMs: 200, concurrency: 1 }, workMs: () => 5 },
  { name: '5 per 200 ms, 2 at a time, works of 30–80 ms', pace: { limit: 5, periodMs: 200, concurrency: 2 }, workMs: () => 30 + Math.random() * 50 },
];

/** The most of `sorted` (ms, ascending) in any window [t, t + ms). */
function mostInWindow(sorted, ms) {
  let most = 0;
  for (let i = 0, j = 0; i < sorted.length; i++) {
    while (j < sorted.length && sorted[j] - sorted[i] < ms) j++;
    most = Math.max(most, j - i);
  }
  return most;
}

/** The shortest span from a start of `sorted` (ms, ascending) to the `n`-th after it. */
function shortestSpan(sorted, n) {
  let shortest = Infinity;
  for (let i = 0; i + n < sorted.length; i++) shortest = Math.min(shortest, sorted[i + n] - sorted[i]);
  return shortest;
}

async function run(make, { pace, workMs }, shape) {
  const paced = make(pace);
  const keys = Array.from({ length: keyCount }, (_, i) => `key-${i}`);
  const starts = new Map(keys.map((key) => [key, []]));
  const running = new Map(keys.map((key) => [key, 0]));
  let widest = 0;
  const waits = [];
  const call = async (key) => {
    const asked = performance.now();
    await paced(key, async () => {
      const now = performance.now();
      starts.get(key).push(now);
      waits.push(now - asked);
      const inFlight = running.get(key) + 1;
      running.set(key, inFlight);
      widest = Math.max(widest, inFlight);
      await sleep(workMs());
      running.set(key, running.get(key) - 1);
    });
  };
  const cpu = process.cpuUsage();
  const t0 = performance.now();
  const until = t0 + seconds * 1000;
  const loops = [];
  if (shape === 'saturated') {
    for (const key of keys) {
      for (let c = 0; c < callers; c++) {
        loops.push(
          (async () => {
            while (performance.now() < until) await call(key);
          })(),
        );
      }
    }
  } else {
    for (const key of keys) {
      loops.push(
        (async () => {
          const calls = [];
          // Each key's first burst at a random phase, so the keys' limiters do not tick together.
          await sleep(Math.random() * pace.periodMs);
          while (performance.now() < until) {
            for (let i = 0; i < pace.limit; i++) calls.push(call(key));
            await sleep(pace.periodMs / 2 + Math.random() * pace.periodMs * 1.5);
          }
          await Promise.all(calls);
        })(),
      );
    }
  }
  await Promise.all(loops);
  const elapsedS = (performance.now() - t0) / 1000;
  const used = process.cpuUsage(cpu);
  await paced.close();
  // Starts per second per key over the saturated stretch: from the first start to `until`.
  const perKey = keys.map((key) => starts.get(key).filter((s) => s < until).length / ((until - t0) / 1000));
  const works = waits.length;
  const sorted = keys.map((key) => starts.get(key).sort((a, b) => a - b));
  return {
    perKey,
    most: Math.max(...sorted.map((s) => mostInWindow(s, pace.periodMs - CLOCK_MS))),
    span: Math.min(...sorted.map((s) => shortestSpan(s, pace.limit))),
    widest,
    p50: quantile(waits, 0.5),
    p99: quantile(waits, 0.99),
    cpuUs: (used.user + used.system) / works,
    works,
    elapsedS,
  };
}

const f = (x, d = 1) => x.toFixed(d);
console.log(`${keyCount} keys, ${seconds} s per row, node ${process.version}; saturated: ${callers} callers per key`);
for (const config of configs) {
  const { limit, periodMs } = config.pace;
  const ideal = (limit * 1000) / periodMs;
  for (const shape of ['saturated', 'bursts']) {
    console.log('');
    console.log(`### ${config.name} — ${shape}`);
    console.log('');
    console.log(
      `| peer | starts/s per key (ideal ${f(ideal)}): mean (min–max) | shortest span of ${limit + 1} starts, ms (ideal ≥ ${periodMs}) | most starts in ${periodMs - CLOCK_MS} ms (limit ${limit}) | most at once | wait p50 / p99 ms | CPU µs per work |`,
    );
    console.log('| --- | --- | --- | --- | --- | --- | --- |');
    for (const [name, make] of Object.entries(pacePeers)) {
      if (only && !name.includes(only)) continue;
      const r = await run(make, config, shape);
      const mean = r.perKey.reduce((a, b) => a + b, 0) / r.perKey.length;
      console.log(
        `| ${name} | ${f(mean)} (${f(Math.min(...r.perKey))}–${f(Math.max(...r.perKey))}) | ${f(r.span)} | ${r.most} | ${r.widest} | ${f(r.p50, 0)} / ${f(r.p99, 0)} | ${f(r.cpuUs, 0)} |`,
      );
    }
  }
}
