// A name taken 3 at a time across two workerd isolates over Durable Objects
// (tests/workerd/semaphore-worker.mjs): the lock as a semaphore, and the serializer at
// concurrency 3 over the store — each held to its history, which the isolates send to this
// process while they hold: never more than 3 holders, never two in one slot, fences rising per
// slot.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';

import { Miniflare } from 'miniflare';

import { collectedEvents, worker } from '../runtimes/workerd.mjs';
import { checkHistory } from './semaphore-loops.mjs';

let mf;
const { events, outboundService } = collectedEvents();
before(() => {
  const shared = (name, locks) => ({ ...worker('tests/workerd/semaphore-worker.mjs'), name, outboundService, durableObjects: { LOCKS: locks } });
  mf = new Miniflare({
    cf: false,
    workers: [shared('a', { className: 'LockDurableObject', useSQLite: true }), shared('b', { className: 'LockDurableObject', scriptName: 'a', useSQLite: true })],
  });
});
after(() => mf?.dispose());

/** Both isolates at once, each `body` with its name. */
async function both(body) {
  events.length = 0;
  const answers = await Promise.all(
    ['a', 'b'].map(async (who) => {
      const fetcher = await mf.getWorker(who);
      const response = await fetcher.fetch('http://semaphore/', { method: 'POST', body: JSON.stringify({ ...body, who }) });
      assert.equal(response.status, 200, await response.clone().text());
      return (await response.json()).taken;
    }),
  );
  return answers;
}

test('two workerd isolates, 2 × 4 holders of a lock at concurrency 3: at most 3 at once, one per slot, fences rising per slot', async () => {
  const taken = await both({ op: 'lock', holders: 4, turns: 15, holdMs: 4 });
  assert.deepEqual(taken, [60, 60]);
  const { most, turns, perSlot } = checkHistory(events, 3);
  assert.equal(turns, 120);
  assert.equal(most, 3, `every slot in use at once (${perSlot})`);
});

test('two workerd isolates, a serializer at concurrency 3 over the store: at most 3 works of a key at once, fences rising per slot', async () => {
  const taken = await both({ op: 'serialize', works: 60, holdMs: 4 });
  assert.deepEqual(taken, [60, 60]);
  const { most, turns } = checkHistory(events, 3);
  assert.equal(turns, 120);
  assert.equal(most, 3);
});
