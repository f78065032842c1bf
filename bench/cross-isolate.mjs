// A hand-off across isolates: two package instances (the ESM entry and the CommonJS one, each
// its own wasm instance, as two isolates would be) over one MemoryStore. A holds a name for
// 30 ms while B asks for it; B's wait after A's release, and the store calls of both cycles
// (A's acquire+release and B's), with the store's `changed` (wake-ups) and without (polls);
// then the same over redis-server, and between two workerd isolates over the Durable Object
// store.
//
//   node bench/cross-isolate.mjs [--cycles N]
//
// Not a test: it asserts nothing about speed.
import { createRequire } from 'node:module';
import { setTimeout as sleep } from 'node:timers/promises';

import * as a from 'keyturn';

const b = createRequire(import.meta.url)('keyturn');
const args = process.argv.slice(2);
const at = args.indexOf('--cycles');
const cycles = at === -1 ? 40 : Number(args[at + 1]);
const HOLD_MS = 30;

function countingStore(tells) {
  const inner = new a.MemoryStore();
  const store = {
    calls: 0,
    create: (key, value) => (store.calls++, inner.create(key, value)),
    read: (key) => (store.calls++, inner.read(key)),
    replace: (key, version, value) => (store.calls++, inner.replace(key, version, value)),
  };
  if (tells) store.changed = (key, version, ms) => (store.calls++, inner.changed(key, version, ms));
  return store;
}

import { busyKey, localHolder, quantile } from '../tests/js/busy-key.mjs';

/** One row: B's waits after the release (p50, max) and the calls per exchange (p50, max). */
const row = (label, waits, calls) =>
  console.log(
    `${label.padEnd(25)} ${quantile(waits, 0.5).toFixed(2).padStart(23)} ${quantile(waits, 1).toFixed(2).padStart(8)} ${String(quantile(calls, 0.5)).padStart(24)} ${String(quantile(calls, 1)).padStart(5)}`,
  );

/** A holds `name` (in instance a, over `storeA`) while B asks (b, `storeB`): B's wait after the release, in ms. */
async function exchange(storeA, storeB, name) {
  const held = await a.acquireLock(storeA, name);
  const asked = b.acquireLock(storeB, name, { waitMs: 1000 });
  await sleep(HOLD_MS);
  const released = performance.now();
  await held.release();
  const lock = await asked;
  const waited = performance.now() - released;
  await lock.release();
  return waited;
}

console.log(`a hand-off across two instances over one MemoryStore: A holds ${HOLD_MS} ms while B waits; ${cycles} cycles, node ${process.version}`);
console.log('');
console.log('store                     B after release p50 ms   max ms   calls per exchange p50   max');
for (const tells of [true, false]) {
  const store = countingStore(tells);
  const waits = [];
  const calls = [];
  for (let i = 0; i < cycles; i++) {
    const before = store.calls;
    waits.push(await exchange(store, store, `k${i}`));
    calls.push(store.calls - before);
  }
  row(tells ? 'with changed (wake-ups)' : 'three methods (polls)', waits, calls);
}

// A busy key (tests/js/busy-key.mjs): A keeps 4 works of 1 ms in flight, B calls every 50 ms.
console.log('');
console.log('a busy key over one MemoryStore: A keeps 4 works in flight, B calls every 50 ms, 6 s');
console.log('');
console.log('store                     B wait p50 ms   max ms   B calls per B turn   all calls per B turn   turns of B   of A');
/** One busy-key row: what B paid, over `storeA` (A's instance) and `storeB` (B's). */
async function busyRow(label, storeA, storeB, calls) {
  const serializeB = b.createKeyedSerializer({ store: storeB, timeoutMs: 10_000 });
  const callsOfB = () => b.lockStats(storeB).storeCalls;
  const { waits, turnsOfA, callsPerTurnOfB, callsOfBPerTurn } = await busyKey({ holder: localHolder(a, storeA), serializeB, callsOfB, ms: 6000 });
  console.log(
    `${label.padEnd(25)} ${quantile(waits, 0.5).toFixed(2).padStart(13)} ${quantile(waits, 1).toFixed(2).padStart(8)} ${callsOfBPerTurn.toFixed(1).padStart(20)} ${callsPerTurnOfB.toFixed(1).padStart(22)} ${String(waits.length).padStart(12)} ${String(turnsOfA).padStart(6)}`,
  );
}
for (const tells of [true, false]) {
  const store = countingStore(tells);
  await busyRow(tells ? 'with changed (wake-ups)' : 'three methods (polls)', store, store, () => store.calls);
}

// The same exchange over redis-server (a server of our own, stopped by PID): each instance with
// its own connections, `subscribe` on a duplicate of its client as the README shows it.
const { createClient } = await import('redis');
const { startRedisServer } = await import('../tests/runtimes/redis-server.mjs');
const server = await startRedisServer();
const connections = [];
const connected = async () => {
  const client = createClient({ url: `redis://127.0.0.1:${server.port}` });
  await client.connect();
  connections.push(client);
  return client;
};
async function redisStore(api, tells) {
  const client = await connected();
  const options = { prefix: `bench-${tells}:` };
  if (tells) {
    const subscriber = client.duplicate();
    await subscriber.connect();
    connections.push(subscriber);
    options.subscribe = async (channel, onMessage) => {
      await subscriber.subscribe(channel, onMessage);
      return () => subscriber.unsubscribe(channel, onMessage);
    };
  }
  const store = new api.RedisStore((script, keys, args) => client.eval(script, { keys, arguments: args }), options);
  return { store, calls: () => api.lockStats(store).storeCalls };
}
try {
  for (const tells of [true, false]) {
    const [sa, sb] = [await redisStore(a, tells), await redisStore(b, tells)];
    const waits = [];
    const calls = [];
    for (let i = 0; i < cycles; i++) {
      const before = sa.calls() + sb.calls();
      waits.push(await exchange(sa.store, sb.store, `k${i}`));
      calls.push(sa.calls() + sb.calls() - before);
    }
    row(tells ? 'Redis, with subscribe' : 'Redis, three methods', waits, calls);
  }
  console.log('');
  console.log('the busy key over redis-server (one connection per instance)');
  for (const tells of [true, false]) {
    const [sa, sb] = [await redisStore(a, tells), await redisStore(b, tells)];
    await busyRow(tells ? 'Redis, with subscribe' : 'Redis, three methods', sa.store, sb.store, () => sa.calls() + sb.calls());
  }
} finally {
  await Promise.all(connections.map((client) => client.quit().catch(() => {})));
  server.stop();
}

// The same exchange in workerd: two isolates (two workers) over one Durable Object namespace,
// each op a request (tests/workerd/lease-worker.mjs). workerd's clocks move only across I/O, so
// B's wait is taken here, between the two answers: A's comes once it released, B's once it got
// the name and released it too.
const { workerdPair } = await import('../tests/runtimes/workerd.mjs');
const mf = workerdPair('tests/workerd/lease-worker.mjs');
try {
  const workers = { a: await mf.getWorker('a'), b: await mf.getWorker('b') };
  const run = async (isolate, step) => {
    const response = await workers[isolate].fetch('http://worker/', { method: 'POST', body: JSON.stringify(step) });
    const body = await response.json();
    return { ...body, at: performance.now() };
  };
  for (const polls of [false, true]) {
    const waits = [];
    const calls = [];
    for (let i = 0; i < cycles; i++) {
      const name = `do-${polls}-${i}`;
      const script = { polls };
      const holding = run('a', { op: 'acquire', name, holdMs: HOLD_MS, script });
      await sleep(5);
      const taker = await run('b', { op: 'acquire', name, waitMs: 2000, script });
      const held = await holding;
      if (!taker.held) throw new Error(`b did not get ${name}: ${JSON.stringify(taker)}`);
      waits.push(taker.at - held.at);
      calls.push(held.calls + taker.calls);
    }
    row(polls ? 'DO, three methods (polls)' : 'DO, with changed', waits, calls);
  }
} finally {
  await mf.dispose();
}
