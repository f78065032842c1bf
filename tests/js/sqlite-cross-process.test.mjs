// Two processes over one libSQL `file:` database, as two isolates elsewhere would be: this test's
// process and a child (tests/runtimes/sqlite-keyturn-process.mjs), each its own keyturn instance
// and its own client. One name contended for 300 turns and a name at concurrency 3, each checked
// from the history both write into the database while they hold (never two holders of a slot,
// fences rising per slot); a holder killed with SIGKILL is taken over after its lease, not
// before; a row deleted between acquisitions still gives fences above every one before.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';

import { createClient } from '@libsql/client';
import { acquireLock, SqliteStore, withLock } from 'keyturn';

import { checkHistory, semaphoreLoops } from './semaphore-loops.mjs';
import { lineProcess } from '../runtimes/line-process.mjs';

const childScript = fileURLToPath(new URL('../runtimes/sqlite-keyturn-process.mjs', import.meta.url));

/** The other process over `url`: `send(command)` answers its reply, in order. */
const keyturnProcess = (url) => lineProcess(childScript, { url });

describe('two processes over one libSQL file: database', () => {
  const dir = mkdtempSync(join(tmpdir(), 'keyturn-sqlite-processes-'));
  const url = `file:${join(dir, 'locks.db')}`;
  const children = [];
  let client;
  let query;
  let store;
  before(async () => {
    client = createClient({ url, timeout: 10_000 });
    query = (sql, args) => client.execute({ sql, args }).then((result) => result.rows);
    // WAL: a reader does not wait for the other process's writer.
    await client.execute('PRAGMA journal_mode = WAL');
    await client.execute('CREATE TABLE history (id INTEGER PRIMARY KEY AUTOINCREMENT, event TEXT NOT NULL)');
    store = new SqliteStore(query);
    await store.setup();
  });
  after(() => {
    for (const child of children) child.kill('SIGKILL'); // by PID: only the processes this test started
    client?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const other = () => {
    const started = keyturnProcess(url);
    children.push(started.process);
    return started;
  };

  /** Both processes' holders of `name` at once: the turns each took, and the history's events. */
  async function both(options) {
    await query('DELETE FROM history', []);
    const record = (event) => query('INSERT INTO history (event) VALUES (?)', [JSON.stringify(event)]);
    const there = other();
    const turns = await Promise.all([
      there.send({ op: 'loops', ...options, who: 'there' }).then((answer) => answer.turns),
      semaphoreLoops(withLock, store, record, { ...options, who: 'here' }),
    ]);
    there.process.stdin.end();
    const events = (await query('SELECT event FROM history ORDER BY id', [])).map((row) => JSON.parse(row.event));
    return { turns, events };
  }

  test('one name, 2 × 3 holders, 300 turns: one holder at a time, fences rising', async () => {
    const { turns, events } = await both({ name: 'one', n: 1, holders: 3, turns: 50, holdMs: 2 });
    assert.deepEqual(turns, [150, 150]);
    const { most, turns: seen } = checkHistory(events, 1);
    assert.equal(seen, 300);
    assert.equal(most, 1);
  });

  test('a name at concurrency 3, 2 × 5 holders: at most 3 at once, one per slot, fences rising per slot', async () => {
    const { turns, events } = await both({ name: 'three', n: 3, holders: 5, turns: 20, holdMs: 4 });
    assert.deepEqual(turns, [100, 100]);
    const { most, turns: seen, perSlot } = checkHistory(events, 3);
    assert.equal(seen, 200);
    assert.equal(most, 3, `every slot in use at once (${perSlot})`);
  });

  test('a holder killed with SIGKILL is taken over after its lease, not before, at a higher fence', async () => {
    const holder = other();
    const gone = await holder.send({ op: 'hold', name: 'killed', staleMs: 1000 });
    const exited = new Promise((resolve) => holder.process.once('exit', resolve));
    holder.process.kill('SIGKILL');
    await exited;
    const lock = await acquireLock(store, 'killed', { waitMs: 30_000 });
    const at = Date.now();
    assert.ok(lock !== undefined && lock.fence > gone.fence, `${lock?.fence} above ${gone.fence}`);
    assert.ok(at >= gone.heldUntil, `taken at ${at}, the lease ran to ${gone.heldUntil}`);
    await lock.release();
  });

  test('a row deleted between acquisitions: either process\'s next fence, a millisecond on, is above every one before', async () => {
    const there = other();
    const fences = [];
    let lastAt;
    const here = async () => {
      const lock = await acquireLock(store, 'lost', { waitMs: 10_000 });
      lastAt = Date.now();
      fences.push(lock.fence);
      await lock.release();
    };
    for (let round = 0; round < 3; round++) {
      await here();
      fences.push((await there.send({ op: 'acquire', name: 'lost', waitMs: 10_000 })).fence);
      await here();
      const deleted = await client.execute({ sql: 'DELETE FROM keyturn_locks WHERE key = ?', args: ['lost'] });
      assert.equal(deleted.rowsAffected, 1, 'the row was there, and is gone');
      // A lost record's fences restart from the clock, in whole milliseconds: the promise is
      // for an acquisition after the last one's millisecond (README, "What the lock promises").
      while (Date.now() <= lastAt) await sleep(1);
    }
    fences.push((await there.send({ op: 'acquire', name: 'lost', waitMs: 10_000 })).fence);
    assert.ok(fences.every((fence, i) => i === 0 || fence > fences[i - 1]), `${fences}`);
    there.process.stdin.end();
  });
});
