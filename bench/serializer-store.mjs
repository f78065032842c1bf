// A serializer with a store (createKeyedSerializer({ store })), over Redis (redis-server, from
// Node) and over the Durable Object store (inside workerd): per-work time and store calls for 16
// concurrent works on one key in one isolate — beside the in-isolate serializer and the
// hand-built serializer + withLock of the example before — and two isolates strictly
// alternating on one key. Not a test: it asserts nothing about speed.
import { createClient } from 'redis';
import * as keyturn from 'keyturn';

import { benchSerializedStore } from './runtimes/serialized-store-bench.mjs';
import { startRedisServer } from '../tests/runtimes/redis-server.mjs';
import { workerdWith } from '../tests/runtimes/workerd.mjs';

const rows = [];

const { port, stop } = await startRedisServer();
try {
  const client = createClient({ url: `redis://127.0.0.1:${port}` });
  await client.connect();
  const makeRedis = () => new keyturn.RedisStore((script, keys, args) => client.eval(script, { keys, arguments: args }));
  rows.push(['Redis (Node)', await benchSerializedStore(makeRedis, keyturn)]);
  await client.quit();
} finally {
  stop();
}

const mf = workerdWith('bench/runtimes/bench-worker.mjs');
try {
  rows.push(['Durable Object store (workerd)', await (await mf.dispatchFetch('http://bench/?serialized=1')).json()]);
} finally {
  await mf.dispose();
}

console.log(`serializer with a store, node ${process.version}: 16 concurrent works on one key in one isolate (median of 30 rounds), and two isolates alternating (100 works after 4 to warm up)`);
console.log('');
console.log('store                            in-isolate µs/work  with store µs/work  calls/work  serializer+withLock µs/work  calls/work  alternating µs/work  calls/change (first 4)');
for (const [label, r] of rows) {
  console.log(
    `${label.padEnd(32)} ${r.localUs.toFixed(1).padStart(18)}  ${r.sharedUs.toFixed(1).padStart(18)}  ${r.sharedCallsPerWork.toFixed(3).padStart(10)}  ${r.handUs.toFixed(1).padStart(27)}  ${r.handCallsPerWork.toFixed(2).padStart(10)}  ${r.alternatingUs.toFixed(1).padStart(19)}  ${r.callsPerChange.toFixed(2).padStart(12)} (${r.coldCallsPerChange.toFixed(2)})${r.fencesRising ? '' : '  FENCES NOT RISING'}`,
  );
}
console.log('');
console.log('targets: with store ≤ 0.2 calls per work; alternating ≤ 3 calls per change of isolate');
