// Per store, in its local engine: store calls and median time per uncontended acquire+release,
// and 16 contenders on one name. Then Redis beside the standard pattern (SET NX PX, a
// compare-and-delete script, retries every 2–10 ms with jitter), in one run: the pattern sends
// its script (EVAL) as node-redis's docs show it, and is also timed naming it by SHA-1
// (EVALSHA), as keyturn's store here does.
//
//   node bench/stores.mjs           every store
//   node bench/stores.mjs redis     Redis and the pattern only
//
// Not a test: it asserts nothing about speed.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';

import { createClient } from 'redis';
import { acquireLock, MemoryStore, RedisStore } from 'keyturn';

import { benchStore } from './runtimes/store-bench.mjs';
import { startRedisServer } from '../tests/runtimes/redis-server.mjs';
import { workerdWith } from '../tests/runtimes/workerd.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const rows = [];
const row = (label, r) =>
  rows.push([label, r.uncontendedMedianUs, r.uncontendedCalls, r.contendedUsPerHold, r.contendedCallsPerAcquisition]);

const only = process.argv[2];
if (only === undefined) {
  row('MemoryStore (Node)', await benchStore(() => new MemoryStore(), acquireLock, { cycles: 2000 }));

  // Durable Objects and R2, inside workerd.
  const mf = workerdWith('bench/runtimes/bench-worker.mjs');
  for (const [store, label] of [['do', 'DurableObjectStore (workerd)'], ['r2', 'R2Store (workerd)']]) {
    row(label, await (await mf.dispatchFetch(`http://bench/?store=${store}`)).json());
  }
  await mf.dispose();

  // Deno KV, in Deno.
  const denoDir = mkdtempSync(join(tmpdir(), 'keyturn-deno-bench-'));
  try {
    const out = execFileSync(join(root, 'node_modules/.bin/deno'), ['run', '--quiet', '--no-prompt', '--unstable-kv', `--allow-read=${root},${denoDir}`, `--allow-write=${denoDir}`, join(root, 'bench/runtimes/deno-bench.mjs'), join(denoDir, 'kv.sqlite3')], {
      env: { ...process.env, DENO_NO_UPDATE_CHECK: '1', NO_COLOR: '1', DENO_DIR: join(denoDir, 'deno-dir') },
      encoding: 'utf8',
    });
    row('DenoKvStore (Deno KV, local)', JSON.parse(out.trim().split('\n').pop()));
  } finally {
    rmSync(denoDir, { recursive: true, force: true });
  }
}

// Redis: a server of our own on a loopback port, stopped by PID at the end.
const { port, stop } = await startRedisServer();
const redisRows = [];
try {
  const client = createClient({ url: `redis://127.0.0.1:${port}` });
  await client.connect();
  // keyturn's store as docs/stores.md shows it for node-redis, scripts named by SHA-1 (EVALSHA).
  const evalFn = (script, keys, args) => client.eval(script, { keys, arguments: args });
  const evalShaFn = (sha, keys, args) => client.evalSha(sha, { keys, arguments: args });
  const keyturn = await benchStore(() => new RedisStore(evalFn, { evalShaFn }), acquireLock, { cycles: 2000, holds: 50 });

  // The standard pattern: SET NX PX to take, a script to delete only our own token.
  const UNLOCK = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";
  let patternCalls = 0;
  const take = async (key, token) => {
    patternCalls += 1;
    return (await client.set(key, token, { NX: true, PX: 2000 })) === 'OK';
  };
  const give = async (key, token) => {
    patternCalls += 1;
    await client.eval(UNLOCK, { keys: [key], arguments: [token] });
  };
  // The same pattern with its script named by SHA-1, as keyturn's store names its own.
  const UNLOCK_SHA = await client.scriptLoad(UNLOCK);
  const giveBySha = async (key, token) => {
    await client.evalSha(UNLOCK_SHA, { keys: [key], arguments: [token] });
  };
  // The floor for any lock over RedisStore: the same two calls with the same record, made by a
  // few lines of plain JS (no queue, no takeover, no checks): what the store's scripts cost
  // beside SET NX, apart from keyturn's own work.
  const redisStore = new RedisStore(evalFn, { evalShaFn });
  const freed = new Map();
  const plainCycle = async (name) => {
    const free = freed.get(name);
    const fence = free ? free.fence + 1 : 1;
    const held = `{"keyturn":1,"state":"held","token":"${crypto.randomUUID().replaceAll('-', '')}","fence":${fence},"at":${Date.now()}}`;
    const version = free ? await redisStore.replace(name, free.version, held) : await redisStore.create(name, held);
    if (version === null) throw new Error('uncontended CAS failed');
    const released = await redisStore.replace(name, version, `{"keyturn":1,"state":"free","token":"","fence":${fence},"at":${Date.now()}}`);
    freed.set(name, { version: released, fence });
  };
  // Uncontended, interleaved cycle for cycle, so that all see the same machine (round-trip
  // times here drift between runs by more than the differences being measured), in an order
  // that rotates every round: no kind always runs right after the same other one.
  const times = [];
  const shaTimes = [];
  const keyturnTimes = [];
  const plainTimes = [];
  const kinds = [
    [times, async () => {
      const token = crypto.randomUUID();
      if (!(await take('pattern-a', token))) throw new Error('uncontended SET NX failed');
      await give('pattern-a', token);
    }],
    [shaTimes, async () => {
      const token = crypto.randomUUID();
      if ((await client.set('pattern-sha', token, { NX: true, PX: 2000 })) !== 'OK') throw new Error('uncontended SET NX failed');
      await giveBySha('pattern-sha', token);
    }],
    [keyturnTimes, async () => {
      const lock = await acquireLock(redisStore, 'interleaved');
      await lock.release();
    }],
    [plainTimes, () => plainCycle(`plain-${port}`)],
  ];
  for (let i = 0; i < 4000; i++) {
    for (let j = 0; j < kinds.length; j++) {
      const [samples, cycle] = kinds[(i + j) % kinds.length];
      const started = performance.now();
      await cycle();
      samples.push(performance.now() - started);
    }
  }
  const medianUs = (samples) => [...samples].sort((a, b) => a - b)[samples.length >> 1] * 1000;
  const plainUs = medianUs(plainTimes);
  const patternShaUs = medianUs(shaTimes);
  keyturn.uncontendedMedianUs = medianUs(keyturnTimes);
  const uncontended = medianUs(times);
  const uncontendedCalls = patternCalls / 4000;
  patternCalls = 0;
  let holds = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      for (let i = 0; i < 50; ) {
        const token = crypto.randomUUID();
        if (await take('pattern-b', token)) {
          holds += 1;
          i += 1;
          await give('pattern-b', token);
        } else {
          await sleep(2 + Math.random() * 8);
        }
      }
    }),
  );
  const pattern = {
    uncontendedMedianUs: uncontended,
    uncontendedCalls,
    contendedUsPerHold: ((performance.now() - started) / holds) * 1000,
    contendedCallsPerAcquisition: patternCalls / holds,
  };
  row('RedisStore (redis-server)', keyturn);
  row('SET NX PX + compare-and-delete (redis-server)', pattern);
  rows.push(['the pattern, its script by EVALSHA', patternShaUs, 2, NaN, NaN]);
  rows.push(['the same two calls in plain JS (floor)', plainUs, 2, NaN, NaN]);
  redisRows.push(keyturn, pattern, plainUs, patternShaUs);
  await client.quit();
} finally {
  stop();
}

console.log(`store benchmark, node ${process.version}: uncontended acquire+release, and 16 contenders on one name in one isolate`);
console.log('');
console.log('store                                           uncontended µs  calls   contended µs/hold  calls/acquisition');
for (const [label, us, calls, perHold, perAcq] of rows) {
  const cell = (value, digits, width) => (Number.isNaN(value) ? '—' : value.toFixed(digits)).padStart(width);
  console.log(`${label.padEnd(47)} ${cell(us, 1, 14)}  ${cell(calls, 2, 5)}   ${cell(perHold, 1, 17)}  ${cell(perAcq, 2, 17)}`);
}
const [k, p, floor, patternSha] = redisRows;
console.log('');
console.log(`Redis, keyturn ÷ pattern: uncontended time ${(k.uncontendedMedianUs / p.uncontendedMedianUs).toFixed(3)}× (target ≤ 1.1), contended time per hold ${(k.contendedUsPerHold / p.contendedUsPerHold).toFixed(2)}× (target ≤ 0.5), calls per acquisition ${k.contendedCallsPerAcquisition.toFixed(2)} (target ≤ 1.5)`);
console.log(`Redis, keyturn ÷ the pattern with EVALSHA: uncontended time ${(k.uncontendedMedianUs / patternSha).toFixed(3)}×`);
console.log(`Redis floor: the same two calls in plain JS take ${(floor / p.uncontendedMedianUs).toFixed(3)}× the pattern uncontended, ${(floor / patternSha).toFixed(3)}× the pattern with EVALSHA`);
