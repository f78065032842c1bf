// Two processes over one postgresql server, as two isolates elsewhere would be: this test's
// process and a child (tests/runtimes/postgres-keyturn-process.mjs), each its own keyturn
// instance with its own pool — contending for one name (300 turns) and for a name taken 3 at a
// time, with LISTEN/NOTIFY and without, each held to the history their turns wrote into a table
// on the server (never two holders of a slot, fences rising per slot); a holder killed is taken
// over after its lease, not before; a record deleted between acquisitions still gives fences
// above every one before. The server is this test's own, stopped by its PID.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';

import * as keyturn from 'keyturn';

import { checkHistory, semaphoreLoops } from './semaphore-loops.mjs';
import { pgListener, pgPool } from '../runtimes/postgres-clients.mjs';
import { postgresProcess } from '../runtimes/postgres-keyturn-processes.mjs';
import { havePostgresServer, startPostgresServer } from '../runtimes/postgres-server.mjs';

let instances = 0;
/** A fresh package instance — its own module, wasm instance and lock core — as a new isolate has. */
const freshInstance = () => import(new URL(`../../pkg/node.mjs?instance=${++instances}`, import.meta.url));

describe('two processes over a postgresql server', { skip: !havePostgresServer() && 'no postgresql server binaries (/usr/lib/postgresql/*/bin): scripts/setup.sh installs them' }, () => {
  let server;
  let pool;
  const listeners = [];
  const processes = [];
  let tables = 0;
  before(async () => {
    server = await startPostgresServer();
    pool = pgPool(server);
  });
  after(async () => {
    for (const child of processes) child.stop();
    await Promise.all(listeners.map((listener) => listener.end().catch(() => {})));
    await pool?.end().catch(() => {});
    await server?.close(); // by PID: only the server this test started
  });

  /** A new lock table, and this process's store over it (with `listen` when `tells`). */
  async function storeHere(tells) {
    const table = `locks_${++tables}`;
    const options = { table };
    if (tells) {
      const listener = await pgListener(server);
      listeners.push(listener);
      options.listen = listener.listen;
    }
    const store = new keyturn.PostgresStore(pool.query, options);
    await store.setup();
    return { table, store };
  }

  /** The other process, over `table`, killed at the end. */
  function other(table, tells) {
    const child = postgresProcess({ host: server.host, port: server.port, table, listen: tells });
    processes.push(child);
    return child;
  }

  for (const tells of [true, false]) {
    for (const [n, holders, turns] of [[1, 3, 50], [3, 5, 20]]) {
      const all = 2 * holders * turns;
      test(`a name at concurrency ${n}, 2 × ${holders} holders, ${all} turns (${tells ? 'listen' : 'polling'}): the history on the server`, async () => {
        const { table, store } = await storeHere(tells);
        const log = `${table}_history`;
        await pool.query(`CREATE TABLE "${log}" (seq bigserial PRIMARY KEY, event text NOT NULL)`, []);
        const there = other(table, tells);
        // A turn's `in` is inserted once held and its `out` before its release: the serial
        // column orders them as they held, across both processes.
        const record = (event) => pool.query(`INSERT INTO "${log}" (event) VALUES ($1)`, [JSON.stringify(event)]);
        const options = { name: 'shared', n, holders, turns, holdMs: 5 };
        const [theirs, ours] = await Promise.all([
          there.send({ op: 'semaphore', log, ...options, who: 'there' }),
          semaphoreLoops(keyturn.withLock, store, record, { ...options, who: 'here' }),
        ]);
        assert.deepEqual([theirs.turns, ours], [holders * turns, holders * turns]);
        const events = (await pool.query(`SELECT event FROM "${log}" ORDER BY seq`, [])).map((row) => JSON.parse(row.event));
        const { most, turns: seen, perSlot } = checkHistory(events, n);
        assert.equal(seen, all);
        assert.equal(most, n, `every slot used at once (${perSlot})`);
        assert.ok(events.some((event) => event.who === 'there') && events.some((event) => event.who === 'here'));
        there.stop();
      });
    }
  }

  test('a holder killed is taken over after its lease, not before, with a higher fence', async () => {
    const { table, store } = await storeHere(true);
    const there = other(table, true);
    const staleMs = 1000;
    const { fence } = await there.send({ op: 'hold', name: 'k', staleMs });
    const { at } = JSON.parse((await store.read('k')).value); // when the holder stamped its record
    there.process.kill('SIGKILL');
    await there.exited;
    const lock = await keyturn.acquireLock(store, 'k', { staleMs, waitMs: 20_000 });
    const takenAt = Date.now();
    assert.ok(lock !== undefined && lock.fence > fence, `${lock?.fence} above ${fence}`);
    // The record was stamped before it was written: no taker may come before a lease after that.
    assert.ok(takenAt >= at + staleMs, `taken ${takenAt - at} ms after the dead holder's record`);
    assert.equal(keyturn.lockStats(store).takeovers, 1);
    await lock.release();
  });

  test('a record deleted between acquisitions: the same store, and a fresh instance, take fences above every one before', async () => {
    const { table, store } = await storeHere(false);
    const fences = [];
    const cycle = async (lockStore, acquire) => {
      const lock = await acquire(lockStore, 'account-1');
      assert.ok(lock !== undefined, 'free: taken at once');
      fences.push(lock.fence);
      await lock.release();
    };
    for (let i = 0; i < 5; i++) await cycle(store, keyturn.acquireLock);
    const lost = async () => {
      assert.equal((await pool.query(`DELETE FROM ${table} WHERE key = $1 RETURNING key`, ['account-1'])).length, 1, 'the store lost it');
      // Fences follow the clock: a millisecond at least after the last acquisition before.
      const lastAt = Date.now();
      while (Date.now() <= lastAt) await sleep(1);
    };
    // The same store object knew the record's version: its write finds no row, and it starts again.
    await lost();
    for (let i = 0; i < 3; i++) await cycle(store, keyturn.acquireLock);
    // A fresh instance, knowing nothing of the name.
    await lost();
    const fresh = await freshInstance();
    const freshStore = new fresh.PostgresStore(pool.query, { table });
    for (let i = 0; i < 3; i++) await cycle(freshStore, fresh.acquireLock);
    assert.equal(fences.length, 11);
    assert.ok(fences.every((fence, i) => i === 0 || fence > fences[i - 1]), `fences rise across the losses: ${fences}`);
  });
});
