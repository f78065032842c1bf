// Two processes over one redis-server, as two isolates elsewhere would be: this test's process
// and a child (tests/runtimes/redis-keyturn-process.mjs), each its own keyturn instance with its
// own connections. A busy key in the child does not overtake this process's calls without bound,
// with wake-ups (`subscribe`) and without; a process killed after it asked for a name costs the
// next taker one offer, never a lease. The server is this test's own, stopped by its PID.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';

import { createClient } from 'redis';
import { acquireLock, createKeyedSerializer, lockStats, RedisStore } from 'keyturn';

import { BUSY_MACHINE_MS, busyKey, quantile } from './busy-key.mjs';
import { keyturnProcess } from '../runtimes/redis-keyturn-processes.mjs';
import { checkPaced, epochMs, pacedWorks } from './paced-works.mjs';
import { haveRedisServer, startRedisServer } from '../runtimes/redis-server.mjs';

describe('two processes over redis-server', { skip: !haveRedisServer() && 'no redis-server' }, () => {
  let server;
  const clients = [];
  const processes = [];
  before(async () => {
    server = await startRedisServer();
  });
  after(async () => {
    for (const process of processes) process.kill('SIGKILL');
    await Promise.all(clients.map((client) => client.quit().catch(() => {})));
    server?.stop();
  });

  /** This process's store over the test's server, with `subscribe` when `tells`. */
  async function storeHere(prefix, tells) {
    const client = await createClient({ url: `redis://127.0.0.1:${server.port}` }).connect();
    clients.push(client);
    const options = { prefix };
    if (tells) {
      const subscriber = await client.duplicate().connect();
      clients.push(subscriber);
      options.subscribe = async (channel, onMessage) => {
        await subscriber.subscribe(channel, onMessage);
        return () => subscriber.unsubscribe(channel, onMessage);
      };
    }
    return new RedisStore((script, keys, args) => client.eval(script, { keys, arguments: args }), options);
  }

  /** The other process, stopped at the end. */
  function other(prefix, tells) {
    const started = keyturnProcess({ port: server.port, prefix, tells });
    processes.push(started.process);
    return started;
  }

  for (const tells of [true, false]) {
    test(`a busy key in the other process: a call here waits about one batch of its, not for it to idle (${tells ? 'wake-ups' : 'three methods'})`, async () => {
      const prefix = `busy-${tells}:`;
      const holder = other(prefix, tells);
      const store = await storeHere(prefix, tells);
      const serializeB = createKeyedSerializer({ store, timeoutMs: 10_000 });
      const result = await busyKey({
        holder: holder.holder,
        serializeB,
        callsOfB: () => lockStats(store).storeCalls,
        ms: 2000,
      });
      const { waits, turnsOfA, callsPerTurnOfB, callsOfBPerTurn } = result;
      const [p50, max] = [quantile(waits, 0.5), quantile(waits, 1)];
      const report = `p50 ${p50.toFixed(1)} ms, max ${max.toFixed(1)} ms, B's calls ${callsOfBPerTurn.toFixed(1)} and both's ${callsPerTurnOfB.toFixed(1)} per turn of B, ${waits.length} turns of B, ${turnsOfA} of A`;
      assert.ok(waits.length >= 30, report);
      assert.ok(turnsOfA > 200, `A keeps its pace: ${report}`);
      // The bounds of "Turns round isolates" (bench/README.md has the figures), each with
      // BUSY_MACHINE_MS more: these waits are real time between two processes, which a busy
      // machine stretches by tens of milliseconds (here p50 7-9 ms and max up to 45 ms with
      // wake-ups beside two CPU-bound loops, against p50 3-5 and max 8-19 idle). A caller left waiting
      // for the holder to idle waits the whole 2 s run, far above them; the bounds themselves
      // are held exactly on mocked time (cross-isolate.test.mjs).
      assert.ok(p50 <= (tells ? 15 : 60) + BUSY_MACHINE_MS, report);
      assert.ok(max <= (tells ? 100 : 250) + BUSY_MACHINE_MS, report);
      assert.ok(callsOfBPerTurn <= (tells ? 16 : 40), report);
      holder.stop();
    });
  }

  test('a pace across two processes: 40 works of one key at 4 per 200 ms, no 5 starts within 200 ms, none overlapping', async () => {
    const prefix = 'paced:';
    const log = 'paced-log';
    const store = await storeHere(prefix, true);
    const [client] = clients;
    const child = other(prefix, true);
    const began = epochMs();
    const paced = createKeyedSerializer({ store, timeoutMs: 10_000, rate: { limit: 4, periodMs: 200 } });
    await Promise.all([
      child.send({ op: 'paced', key: 'k', count: 20, limit: 4, periodMs: 200, log }),
      pacedWorks(paced, 'k', 20, (event) => client.rPush(log, JSON.stringify(event))),
    ]);
    const events = (await client.lRange(log, 0, -1)).map((line) => JSON.parse(line));
    assert.equal(events.length, 40);
    // A start is timed after its work's synchronous part, where the work reads its own start:
    // the pace holds the works' reads to 200 ms, less the clocks' 3 ms (the engine's wall clock
    // in whole milliseconds, each process's epoch from its own origin). A work's end is read
    // before the next can start: overlaps keep the same 3 ms.
    const starts = checkPaced(events, { limit: 4, periodMs: 200, allowanceMs: 3 });
    // The pace's own time is 9 periods (1 800 ms) from the first start to the last; the issue's
    // 2.6 s bound is timed from the first start, not from the first call, which the other
    // process's start-up delays on a busy machine (3 095 ms from it was seen beside a
    // CPU-bound loop). A period 1.5 times too long, or a hand-off that waited out a lease,
    // still fails it.
    assert.ok(starts[39] - starts[0] <= 2600, `the last started ${(starts[39] - starts[0]).toFixed(0)} ms after the first, ${(starts[39] - began).toFixed(0)} ms after the first call`);
    child.stop();
  });

  test('a process killed after it asked for a name costs the next taker one offer (100 ms), never a lease', async () => {
    const prefix = 'killed:';
    const store = await storeHere(prefix, true);
    const held = await acquireLock(store, 'k', { staleMs: 5000 });
    const asker = other(prefix, true);
    await asker.send({ op: 'acquire', name: 'k', waitMs: 10_000 });
    // Its ask reaches the record, then the process dies.
    for (let i = 0; i < 200 && JSON.parse((await store.read('k')).value).asks === undefined; i++) await new Promise((resolve) => setTimeout(resolve, 10));
    assert.ok(JSON.parse((await store.read('k')).value).asks, 'the other process asked');
    const exited = new Promise((resolve) => asker.process.once('exit', resolve));
    asker.process.kill('SIGKILL');
    await exited;
    await held.release();
    const started = performance.now();
    const lock = await acquireLock(store, 'k', { staleMs: 5000, waitMs: 3000 });
    const ms = performance.now() - started;
    assert.ok(lock !== undefined && lock.fence > held.fence);
    // The release offered the name to the dead asker first, for 100 ms; then it is this
    // taker's, the dead ask dropped — not the 5 s lease a dead holder costs.
    assert.ok(ms >= 50 && ms < 1000, `taken after ${ms} ms`);
    assert.equal(JSON.parse((await store.read('k')).value).asks, undefined);
    await lock.release();
  });
});
