// Turns across isolates, as users pay for them: what a hand-off costs and how long it takes, and
// what a busy key costs another isolate that calls now and then.
//
// Hand-off: A holds a name for 30 ms while B asks for it; B's wait after A's release, and the
// store calls of both cycles (A's acquire+release and B's). Busy key (tests/js/busy-key.mjs): A
// keeps 4 works of 1 ms in flight on a key, B calls once every 50 ms; B's waits, B's store calls
// per turn of B, and both isolates' per turn of B. Each with the store's `changed` (wake-ups)
// and without (polls), over three pairs of isolates:
// - two package instances in this process (the ESM entry and the CommonJS one, each its own
//   wasm instance, as two isolates would be) over one MemoryStore;
// - two processes over a redis-server of our own (stopped by PID) — for the hand-off, two
//   instances in this process, each with its own connections;
// - two workerd isolates (two workers) over one Durable Object namespace.
//
//   node bench/cross-isolate.mjs [--cycles N] [--busy-ms MS]
//
// Not a test: it asserts nothing about speed.
import { createRequire } from 'node:module';
import { setTimeout as sleep } from 'node:timers/promises';

import * as a from 'keyturn';

import { busyKey, busyKeyInWorkerd, localHolder, quantile } from '../tests/js/busy-key.mjs';
import { numberOption } from './runtimes/options.mjs';
import { handOff } from './runtimes/store-bench.mjs';

const b = createRequire(import.meta.url)('keyturn');
const cycles = numberOption('cycles', 40);
const busyMs = numberOption('busy-ms', 6000);
const HOLD_MS = 30;

/** A MemoryStore, with its `changed` or without. */
function memoryStore(tells) {
  const inner = new a.MemoryStore();
  const store = {
    create: (key, value) => inner.create(key, value),
    read: (key) => inner.read(key),
    replace: (key, version, value) => inner.replace(key, version, value),
  };
  if (tells) store.changed = (key, version, ms) => inner.changed(key, version, ms);
  return store;
}

const handOffs = [];
const busyKeys = [];

/** A holds `name` (in instance a, over `storeA`) while B asks (b, `storeB`): B's wait after the release, in ms. */
const exchange = (storeA, storeB, name) => handOff(a, b, storeA, storeB, name, HOLD_MS);

/** `cycles` hand-offs between instance a over `storeA` and b over `storeB`: one row. */
async function handOffRow(label, storeA, storeB, prefix) {
  const calls = () => a.lockStats(storeA).storeCalls + b.lockStats(storeB).storeCalls;
  const waits = [];
  const spent = [];
  for (let i = 0; i < cycles; i++) {
    const before = calls();
    waits.push(await exchange(storeA, storeB, `${prefix}${i}`));
    spent.push(calls() - before);
  }
  handOffs.push({ label, waits, spent });
}

/** One busy-key row from what busyKey (or busyKeyInWorkerd) answered. */
const busyRow = (label, { waits, turnsOfA, callsPerTurnOfB, callsOfBPerTurn }) => busyKeys.push({ label, waits, turnsOfA, callsPerTurnOfB, callsOfBPerTurn });

for (const tells of [true, false]) {
  const store = memoryStore(tells);
  await handOffRow(`MemoryStore, ${tells ? 'wake-ups' : 'polls'}`, store, store, `k-${tells}-`);
  const busy = memoryStore(tells);
  const serializeB = b.createKeyedSerializer({ store: busy, timeoutMs: 10_000 });
  busyRow(`MemoryStore, ${tells ? 'wake-ups' : 'polls'}`, await busyKey({ holder: localHolder(a, busy), serializeB, callsOfB: () => b.lockStats(busy).storeCalls, ms: busyMs }));
}

// Over redis-server: its clients as docs/stores.md shows them, `subscribe` on a duplicate.
const { createClient } = await import('redis');
const { startRedisServer } = await import('../tests/runtimes/redis-server.mjs');
const { keyturnProcess } = await import('../tests/runtimes/redis-keyturn-processes.mjs');
const server = await startRedisServer();
const connections = [];
async function redisStore(api, tells, prefix) {
  const client = await createClient({ url: `redis://127.0.0.1:${server.port}` }).connect();
  connections.push(client);
  const options = { prefix };
  if (tells) {
    const subscriber = await client.duplicate().connect();
    connections.push(subscriber);
    options.subscribe = async (channel, onMessage) => {
      await subscriber.subscribe(channel, onMessage);
      return () => subscriber.unsubscribe(channel, onMessage);
    };
  }
  return new api.RedisStore((script, keys, args) => client.eval(script, { keys, arguments: args }), options);
}
try {
  for (const tells of [true, false]) {
    const prefix = `bench-${tells}:`;
    await handOffRow(`Redis, ${tells ? 'wake-ups' : 'polls'}`, await redisStore(a, tells, prefix), await redisStore(b, tells, prefix), 'k');
    const busyPrefix = `bench-busy-${tells}:`;
    const other = keyturnProcess({ port: server.port, prefix: busyPrefix, tells });
    const store = await redisStore(b, tells, busyPrefix);
    const serializeB = b.createKeyedSerializer({ store, timeoutMs: 10_000 });
    busyRow(`Redis, ${tells ? 'wake-ups' : 'polls'}`, await busyKey({ holder: other.holder, serializeB, callsOfB: () => b.lockStats(store).storeCalls, ms: busyMs }));
    other.stop();
  }
} finally {
  await Promise.all(connections.map((client) => client.quit().catch(() => {})));
  server.stop();
}

// In workerd: two isolates (two workers) over one Durable Object namespace, each op a request.
// workerd's clocks move only across I/O, so a hand-off's wait is taken here, between the two
// answers: A's comes once it released, B's once it got the name and released it too (so it
// includes B's read and CAS round trips to the object, and one answer's transport).
const { workerdPair } = await import('../tests/runtimes/workerd.mjs');
const pair = workerdPair('tests/workerd/lease-worker.mjs');
try {
  const workers = { a: await pair.getWorker('a'), b: await pair.getWorker('b') };
  const run = async (isolate, step) => {
    const response = await workers[isolate].fetch('http://worker/', { method: 'POST', body: JSON.stringify(step) });
    return { ...(await response.json()), at: performance.now() };
  };
  for (const polls of [false, true]) {
    const waits = [];
    const spent = [];
    for (let i = 0; i < cycles; i++) {
      const name = `do-${polls}-${i}`;
      const script = { polls };
      const holding = run('a', { op: 'acquire', name, holdMs: HOLD_MS, script });
      await sleep(5);
      const taker = await run('b', { op: 'acquire', name, waitMs: 2000, script });
      const held = await holding;
      if (!taker.held) throw new Error(`b did not get ${name}: ${JSON.stringify(taker)}`);
      waits.push(taker.at - held.at);
      spent.push(held.calls + taker.calls);
    }
    handOffs.push({ label: `Durable Objects, ${polls ? 'polls' : 'wake-ups'}`, waits, spent });
  }
} finally {
  await pair.dispose();
}
const busyPair = workerdPair('tests/workerd/busy-worker.mjs');
try {
  for (const polls of [false, true]) busyRow(`Durable Objects, ${polls ? 'polls' : 'wake-ups'}`, await busyKeyInWorkerd(busyPair, { polls, ms: busyMs }));
} finally {
  await busyPair.dispose();
}

console.log(`turns across isolates, node ${process.version}`);
console.log('');
console.log(`a hand-off: A holds ${HOLD_MS} ms while B waits; ${cycles} cycles`);
console.log('');
console.log('store                       B after release p50 ms   max ms   calls per exchange p50   max');
for (const { label, waits, spent } of handOffs) {
  console.log(
    `${label.padEnd(27)} ${quantile(waits, 0.5).toFixed(2).padStart(22)} ${quantile(waits, 1).toFixed(2).padStart(8)} ${String(quantile(spent, 0.5)).padStart(24)} ${String(quantile(spent, 1)).padStart(5)}`,
  );
}
console.log('');
console.log(`a busy key: A keeps 4 works of 1 ms in flight, B calls every 50 ms; ${busyMs} ms`);
console.log('');
console.log('store                       B wait p50 ms   max ms   B calls per B turn   all calls per B turn   turns of B   of A');
for (const { label, waits, turnsOfA, callsPerTurnOfB, callsOfBPerTurn } of busyKeys) {
  console.log(
    `${label.padEnd(27)} ${quantile(waits, 0.5).toFixed(2).padStart(13)} ${quantile(waits, 1).toFixed(2).padStart(8)} ${callsOfBPerTurn.toFixed(1).padStart(20)} ${callsPerTurnOfB.toFixed(1).padStart(22)} ${String(waits.length).padStart(12)} ${String(turnsOfA).padStart(6)}`,
  );
}
