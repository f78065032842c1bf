// A store that loses a lock's record — a Redis restarted without persistence, a failover to a
// replica that missed the last writes, an eviction — and fences that follow the clock: a fresh
// package instance, knowing nothing of the name, takes fences above every one handed out
// before, once its acquisition comes more than `maxClockSkewMs` after the last one before the
// loss (README, "What the lock promises").
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';

import { createClient } from 'redis';

import { haveRedisServer, startRedisServer } from '../runtimes/redis-server.mjs';
import { MapStore } from './map-store.mjs';

let instances = 0;
/** A fresh package instance — its own module, wasm instance and lock core — as a new isolate has. */
const freshInstance = () => import(new URL(`../../pkg/node.mjs?instance=${++instances}`, import.meta.url));

/** `count` acquisitions of `name`, each released at once: their fences, and when the last was answered. */
async function acquisitions(keyturn, store, name, count, options) {
  const fences = [];
  for (let i = 0; i < count; i++) {
    const lock = await keyturn.acquireLock(store, name, options);
    assert.ok(lock !== undefined, 'free: taken at once');
    fences.push(lock.fence);
    await lock.release();
  }
  return { fences, lastAt: Date.now() };
}

/** Waits until the wall clock reads past `ms` (a millisecond at least: fences count whole ones). */
async function clockPast(ms) {
  while (Date.now() <= ms) await sleep(1);
}

test('a record lost between acquisitions: a fresh instance on the same clock, then one 20 ms behind with maxClockSkewMs 25 and 50 ms later, take fences above every one before', async () => {
  const records = new Map();
  const before = await acquisitions(await freshInstance(), new MapStore({ records }), 'account-1', 5);
  assert.ok(before.fences.every((fence, i) => i === 0 || fence > before.fences[i - 1]));

  records.delete('account-1'); // the store lost it
  await clockPast(before.lastAt);
  const same = await acquisitions(await freshInstance(), new MapStore({ records }), 'account-1', 3);
  assert.ok(Math.min(...same.fences) > Math.max(...before.fences), `${same.fences} above ${before.fences}`);

  records.delete('account-1'); // and lost again
  await sleep(same.lastAt + 50 - Date.now());
  const behind = { now: () => Date.now() - 20, maxClockSkewMs: 25 };
  const skewed = await acquisitions(await freshInstance(), new MapStore({ records }), 'account-1', 3, behind);
  const all = [...before.fences, ...same.fences];
  assert.ok(Math.min(...skewed.fences) > Math.max(...all), `${skewed.fences} above ${all}`);
  assert.ok(skewed.fences.every(Number.isSafeInteger));
});

test('redis-server killed and started again without persistence: a fresh instance takes fences above every one before', { skip: !haveRedisServer() && 'no redis-server' }, async () => {
  let server = await startRedisServer();
  // One client for the run, as a service keeps: node-redis reconnects to the server started again.
  const client = createClient({ url: `redis://127.0.0.1:${server.port}`, socket: { reconnectStrategy: () => 20 } });
  client.on('error', () => {}); // the connection the restart drops
  await client.connect();
  const evalFn = (script, keys, args) => client.eval(script, { keys, arguments: args });
  try {
    const first = await freshInstance();
    const before = await acquisitions(first, new first.RedisStore(evalFn), 'account-1', 5);

    // The client hears its connection go before the server is back: a command sent before
    // that (the close not yet read) would go down the dead connection and fail with it.
    const dropped = new Promise((resolve) => client.once('reconnecting', resolve));
    server.stop('SIGKILL');
    await server.exited;
    await dropped;
    server = await startRedisServer({ port: server.port }); // empty: nothing was persisted
    assert.equal(await client.get('keyturn-lock:account-1'), null, 'the record is gone');

    const second = await freshInstance();
    const after = await acquisitions(second, new second.RedisStore(evalFn), 'account-1', 3);
    assert.ok(Math.min(...after.fences) > Math.max(...before.fences), `${after.fences} above ${before.fences}`);
  } finally {
    await client.quit().catch(() => {});
    server.stop(); // by PID: only the server this test started
  }
});
