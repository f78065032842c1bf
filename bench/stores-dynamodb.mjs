// DynamoDbStore on dynalite (a server of this run's own on a loopback port, stopped by PID): an
// uncontended acquire + release (`acquireLock`, then `release`) beside its floor — the same two
// requests a cycle makes, two conditional PutItems of a record of the same size, issued
// directly through the same client — alternating pair by pair (which of the two goes first
// alternates too), so both see the same machine. Medians, and the store calls per cycle; and,
// after every 4th pair, the two writes through DynamoDbStore's own `replace`, without a lock.
// Then where the difference goes: each cycle's time outside its requests, and the lock's own
// work over a store that answers after setImmediate (no I/O).
//
// Then a hand-off as bench/cross-isolate.mjs takes it: A holds a name 30 ms while B waits (two
// package instances, the ESM entry and the CommonJS one, each with its own client): B's wait
// after A's release, and the store calls of the whole exchange. The store has no `changed`: B polls.
//
//   node bench/stores-dynamodb.mjs [pairs]     default 3000 pairs, after 300 unmeasured; 40 hand-offs
//
// Not a test: it asserts nothing about speed.
import { createRequire } from 'node:module';
import { setTimeout as sleep } from 'node:timers/promises';

import { acquireLock, DynamoDbStore, lockStats, MemoryStore } from 'keyturn';

import { createTable, dynamoClient, startDynalite } from '../tests/runtimes/dynalite-server.mjs';

const b = createRequire(import.meta.url)('keyturn');
const pairs = Number(process.argv[2] ?? 3000);
const HOLD_MS = 30;
const HAND_OFFS = 40;
const warm = 300;
const TABLE = 'keyturn-locks';

const server = await startDynalite();
try {
  const client = await dynamoClient(server.endpoint);
  await createTable(client, TABLE);
  const store = new DynamoDbStore(client, { table: TABLE });

  // The floor: what a cycle sends, without keyturn — a held record put over the free one by its
  // version, then a free one over it by the version just written. The records are as long as
  // keyturn's (its token is 32 hex digits; its fence, 16 digits).
  const record = (state, token, fence) => JSON.stringify({ keyturn: 1, state, token, fence, at: Date.now(), lease: 2000 });
  let version = 0;
  let current = `floor-${++version}`;
  await client.putItem({ TableName: TABLE, Item: { pk: { S: 'floor' }, value: { S: record('free', '', 0) }, version: { S: current } } });
  let fence = 1_700_000_000_000_000;
  /** The next floor record over the current one, by its version, through `via`. */
  const put = async (value, via = client) => {
    const next = `floor-${++version}`.padEnd(32, '0');
    await via.putItem({
      TableName: TABLE,
      Item: { pk: { S: 'floor' }, value: { S: value }, version: { S: next } },
      ConditionExpression: '#ver = :ver',
      ExpressionAttributeNames: { '#ver': 'version' },
      ExpressionAttributeValues: { ':ver': { S: current } },
    });
    current = next;
  };
  const floorCycle = async () => {
    fence += 1;
    const token = crypto.randomUUID().replaceAll('-', '');
    await put(record('held', token, fence));
    await put(record('free', '', fence));
  };
  // Between the two: the same two writes through DynamoDbStore's own replace, no lock — what the
  // store adds to the floor, apart from the lock's own work.
  let storeVersion = await store.create('store', record('free', '', 0));
  const storeCycle = async () => {
    fence += 1;
    const token = crypto.randomUUID().replaceAll('-', '');
    storeVersion = await store.replace('store', storeVersion, record('held', token, fence));
    storeVersion = await store.replace('store', storeVersion, record('free', '', fence));
    if (storeVersion === null) throw new Error('uncontended CAS failed');
  };
  const keyturnCycle = async () => {
    const lock = await acquireLock(store, 'keyturn');
    await lock.release();
  };

  const keyturnTimes = [];
  const floorTimes = [];
  const storeTimes = [];
  let calls = 0;
  for (let i = 0; i < warm + pairs; i++) {
    const order = i % 2 === 0 ? [[keyturnTimes, keyturnCycle], [floorTimes, floorCycle]] : [[floorTimes, floorCycle], [keyturnTimes, keyturnCycle]];
    // The store's own cycle, after every 4th pair, apart from them: the pairs stay pairs.
    if (i % 4 === 3) order.push([storeTimes, storeCycle]);
    if (i === warm) calls = lockStats(store).storeCalls;
    for (const [samples, cycle] of order) {
      const started = performance.now();
      await cycle();
      if (i >= warm) samples.push(performance.now() - started);
    }
  }
  calls = (lockStats(store).storeCalls - calls) / pairs;
  const quantileUs = (samples, q) => [...samples].sort((a, b) => a - b)[Math.floor((samples.length - 1) * q)] * 1000;
  const k = quantileUs(keyturnTimes, 0.5);
  const f = quantileUs(floorTimes, 0.5);
  console.log(`DynamoDbStore on dynalite, node ${process.version}, ${pairs} pairs alternating`);
  console.log('');
  console.log('cycle                                        median µs   p25 µs   p75 µs  calls');
  const line = (label, samples, count) =>
    console.log(`${label.padEnd(44)} ${quantileUs(samples, 0.5).toFixed(0).padStart(9)} ${quantileUs(samples, 0.25).toFixed(0).padStart(8)} ${quantileUs(samples, 0.75).toFixed(0).padStart(8)}  ${count.toFixed(2).padStart(5)}`);
  line('acquireLock + release (DynamoDbStore)', keyturnTimes, calls);
  line('two conditional PutItems, same client (floor)', floorTimes, 2);
  line('the two through DynamoDbStore.replace', storeTimes, 2);
  console.log('');
  console.log(`keyturn ÷ floor: ${(k / f).toFixed(3)}× (budget ≤ 1.15×), ${((k - f)).toFixed(0)} µs more a cycle`);

  // Where the difference goes: the same pairs (1000) with both sides' requests timed by a thin
  // wrapper of the client — a cycle's time outside its requests; then the same two cycles over
  // a MemoryStore whose answers come after setImmediate (no I/O, everything hot): the lock's own
  // work beside two plain calls.
  let inRequests = 0;
  const timed = (method) => (input) => {
    const started = performance.now();
    return client[method](input).finally(() => {
      inRequests += performance.now() - started;
    });
  };
  const timedClient = { putItem: timed('putItem'), getItem: timed('getItem') };
  const timedStore = new DynamoDbStore(timedClient, { table: TABLE });
  const outside = { keyturn: [], floor: [] };
  const timedCycles = {
    keyturn: async () => {
      const lock = await acquireLock(timedStore, 'timed');
      await lock.release();
    },
    floor: async () => {
      fence += 1;
      for (const value of [record('held', crypto.randomUUID().replaceAll('-', ''), fence), record('free', '', fence)]) {
        await put(value, timedClient);
      }
    },
  };
  for (let i = 0; i < warm + 1000; i++) {
    for (const kind of i % 2 === 0 ? ['keyturn', 'floor'] : ['floor', 'keyturn']) {
      inRequests = 0;
      const started = performance.now();
      await timedCycles[kind]();
      if (i >= warm) outside[kind].push(performance.now() - started - inRequests);
    }
  }
  const memory = new MemoryStore();
  const later = (answer) => new Promise((resolve) => setImmediate(() => resolve(answer)));
  const mock = {
    create: (key, value) => memory.create(key, value).then(later),
    read: (key) => memory.read(key).then(later),
    replace: (key, at, value) => memory.replace(key, at, value).then(later),
  };
  let mockVersion = await memory.create('plain', record('free', '', 0));
  const hot = { keyturn: [], plain: [] };
  const hotCycles = {
    keyturn: async () => {
      const lock = await acquireLock(mock, 'keyturn');
      await lock.release();
    },
    plain: async () => {
      fence += 1;
      mockVersion = await mock.replace('plain', mockVersion, record('held', crypto.randomUUID().replaceAll('-', ''), fence));
      mockVersion = await mock.replace('plain', mockVersion, record('free', '', fence));
    },
  };
  for (let i = 0; i < 30_000; i++) {
    for (const kind of i % 2 === 0 ? ['keyturn', 'plain'] : ['plain', 'keyturn']) {
      const started = performance.now();
      await hotCycles[kind]();
      if (i >= 10_000) hot[kind].push(performance.now() - started);
    }
  }
  console.log(`outside its two requests, median: a keyturn cycle ${quantileUs(outside.keyturn, 0.5).toFixed(1)} µs, the floor ${quantileUs(outside.floor, 0.5).toFixed(1)} µs (1000 pairs)`);
  console.log(`over MemoryStore answering after setImmediate: a keyturn cycle ${quantileUs(hot.keyturn, 0.5).toFixed(1)} µs, the two calls in plain JS ${quantileUs(hot.plain, 0.5).toFixed(1)} µs (20 000 pairs)`);

  const clientB = await dynamoClient(server.endpoint);
  const storeB = new b.DynamoDbStore(clientB, { table: TABLE });
  const exchangeCalls = () => lockStats(store).storeCalls + b.lockStats(storeB).storeCalls;
  const waits = [];
  const spent = [];
  for (let i = 0; i < HAND_OFFS; i++) {
    const before = exchangeCalls();
    const name = `hand-off-${i}`;
    const held = await acquireLock(store, name);
    const asked = b.acquireLock(storeB, name, { waitMs: 1000 });
    await sleep(HOLD_MS);
    const released = performance.now();
    await held.release();
    const lock = await asked;
    waits.push(performance.now() - released);
    await lock.release();
    spent.push(exchangeCalls() - before);
  }
  const ms = (q) => [...waits].sort((x, y) => x - y)[Math.floor((waits.length - 1) * q)];
  const medianCalls = [...spent].sort((x, y) => x - y)[spent.length >> 1];
  console.log('');
  console.log(`a hand-off (A holds ${HOLD_MS} ms while B waits, polling), ${HAND_OFFS} cycles: B after the release p50 ${ms(0.5).toFixed(2)} ms, max ${ms(1).toFixed(2)} ms; ${medianCalls} calls per exchange (median)`);
  client.destroy();
  clientB.destroy();
} finally {
  server.stop();
}
