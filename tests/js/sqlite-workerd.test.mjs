// SqliteStore inside workerd (Miniflare), over D1 and over a Durable Object's SQL storage
// (tests/workerd/sqlite-worker.mjs): the store contract on each, then two workers — two
// isolates — sharing one D1 database: one name contended for 300 turns, a name at concurrency 3,
// each checked from the history the isolates send this process while they hold (never two
// holders of a slot, fences rising per slot); a holder gone is taken over after its lease, not
// before; a row deleted between acquisitions still gives fences above every one before.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';

import { Miniflare } from 'miniflare';

import { collectedEvents, worker } from '../runtimes/workerd.mjs';
import { checkHistory } from './semaphore-loops.mjs';

const script = 'tests/workerd/sqlite-worker.mjs';

describe('one worker: the store contract inside workerd', () => {
  let mf;
  before(() => {
    mf = new Miniflare({
      ...worker(script),
      cf: false,
      d1Databases: ['DB'],
      durableObjects: { SQL_LOCKS: { className: 'SqlLocks', useSQLite: true } },
    });
  });
  after(() => mf?.dispose());

  for (const [store, label] of [['d1', 'D1'], ['do', 'Durable Object SQL']]) {
    test(`SqliteStore over ${label} passes the store contract`, async () => {
      const response = await mf.dispatchFetch(`http://worker/contract?store=${store}`);
      assert.equal(response.status, 200, await response.clone().text());
      assert.deepEqual((await response.json()).failures, []);
    });
  }
});

describe('two workerd isolates over one D1 database', () => {
  let mf;
  const { events, outboundService } = collectedEvents();
  before(() => {
    const shared = (name) => ({
      ...worker(script),
      name,
      outboundService,
      d1Databases: { DB: 'keyturn-sqlite-pair' },
      durableObjects: { SQL_LOCKS: { className: 'SqlLocks', scriptName: 'a', useSQLite: true } },
    });
    mf = new Miniflare({ cf: false, workers: [shared('a'), shared('b')] });
  });
  after(() => mf?.dispose());

  /** POSTs `body` to isolate `who`: its JSON answer. */
  async function ask(who, body) {
    const fetcher = await mf.getWorker(who);
    const response = await fetcher.fetch('http://sqlite/', { method: 'POST', body: JSON.stringify({ ...body, who }) });
    assert.equal(response.status, 200, await response.clone().text());
    return response.json();
  }

  /** Both isolates' holders at once: the turns each took. */
  async function both(body) {
    events.length = 0;
    return Promise.all(['a', 'b'].map(async (who) => (await ask(who, body)).taken));
  }

  test('one name, 2 × 3 holders, 300 turns: one holder at a time, fences rising', async () => {
    const taken = await both({ op: 'loops', name: 'one', n: 1, holders: 3, turns: 50, holdMs: 2 });
    assert.deepEqual(taken, [150, 150]);
    const { most, turns } = checkHistory(events, 1);
    assert.equal(turns, 300);
    assert.equal(most, 1);
    assert.deepEqual(new Set(events.map((event) => event.who)), new Set(['a', 'b']));
  });

  test('a name at concurrency 3, 2 × 5 holders: at most 3 at once, one per slot, fences rising per slot', async () => {
    const taken = await both({ op: 'loops', name: 'three', n: 3, holders: 5, turns: 20, holdMs: 4 });
    assert.deepEqual(taken, [100, 100]);
    const { most, turns, perSlot } = checkHistory(events, 3);
    assert.equal(turns, 200);
    assert.equal(most, 3, `every slot in use at once (${perSlot})`);
  });

  test('a holder gone is taken over by the other isolate after its lease, not before, at a higher fence', async () => {
    const gone = await ask('a', { op: 'hold', name: 'gone', staleMs: 1000 });
    const taken = await ask('b', { op: 'acquire', name: 'gone', waitMs: 30_000 });
    assert.ok(taken.fence > gone.fence, `${taken.fence} above ${gone.fence}`);
    assert.ok(taken.at >= gone.heldUntil, `taken at ${taken.at}, the lease ran to ${gone.heldUntil}`);
  });

  test('a row deleted between acquisitions: the next isolate\'s fence, a millisecond on, is above every one before', async () => {
    const db = await mf.getD1Database('DB', 'a');
    const fences = [];
    for (let round = 0; round < 3; round++) {
      let lastAt;
      for (const who of ['a', 'b', 'a']) {
        const { fence, at } = await ask(who, { op: 'acquire', name: 'lost', waitMs: 10_000 });
        fences.push(fence);
        lastAt = at;
      }
      const { meta } = await db.prepare('DELETE FROM keyturn_locks WHERE key = ?').bind('lost').run();
      assert.equal(meta.changes, 1, 'the row was there, and is gone');
      // A lost record's fences restart from the clock, in whole milliseconds: the promise is
      // for an acquisition after the last one's millisecond (README, "What the lock promises").
      while (Date.now() <= lastAt) await sleep(1);
    }
    fences.push((await ask('b', { op: 'acquire', name: 'lost', waitMs: 10_000 })).fence);
    assert.ok(fences.every((fence, i) => i === 0 || fence > fences[i - 1]), `${fences}`);
  });
});
