// The lease rules under faults, as two isolates sharing one store see them: each scenario runs
// ops (lease-ops.mjs) in isolate `a` or `b` through `run(isolate, step)` and checks what they
// saw. Node runs them on two instances of the package (lease-rules.test.mjs), workerd in two
// isolates sharing a Durable Object namespace and an R2 bucket (workerd-leases.test.mjs). Each
// scenario uses names of its own (`tag` keeps runs apart). Real timers, in both: every outcome
// has 300 ms or more to spare against a busy machine's late timers (tens of milliseconds), and
// every bound on how long something took as much above what it takes.
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';

const HOUR = 3_600_000;

export const SCENARIOS = [
  {
    name: "a release in one isolate reaches the other's waiter promptly: woken by the store where it tells changes",
    async run(run, tag) {
      const name = `handoff-${tag}`;
      const holding = run('a', { op: 'acquire', name, holdMs: 400 });
      await sleep(50);
      const taker = await run('b', { op: 'acquire', name, waitMs: 3000 });
      const held = await holding;
      assert.equal(taker.held, true, JSON.stringify(taker));
      assert.ok(taker.fence > held.fence);
      // It asked about 50 ms in, and waited out the rest of the hold plus at most a poll's pause
      // (about 370 ms in all), not its wait of 3 s.
      assert.ok(taker.ms < 1000, `got it after ${taker.ms} ms`);
      if (tag === 'workerd') {
        // The Durable Object tells changes: create (refused), read, its ask, one watch, read,
        // CAS, release.
        assert.ok(taker.calls <= 7, `${taker.calls} store calls`);
      } else {
        // Node's store here has no `changed`: it polls.
        assert.ok(taker.calls > 7, `${taker.calls} store calls`);
      }
    },
  },
  {
    name: 'an isolate that asked and then left (its request ended) costs the next taker one offer, 100 ms, never a lease',
    async run(run, tag) {
      const name = `gone-${tag}`;
      // Held 700 ms: B's wait has ended (at about 150 ms) well before A lets go.
      const holding = run('a', { op: 'acquire', name, holdMs: 700, staleMs: 5000 });
      await sleep(50);
      // B asks, then its request ends: its wait is cut short at 100 ms, its ask left behind.
      const gone = await run('b', { op: 'acquire', name, waitMs: 5000, staleMs: 5000, abortAfterMs: 100 });
      assert.equal(gone.held, false, JSON.stringify(gone));
      await holding;
      // A's release found the ask: the record is free, offered to B first.
      const { record } = await run('b', { op: 'read', name });
      assert.equal(record.state, 'free');
      assert.equal(record.asks.split(',').length, 1, JSON.stringify(record));
      // A again: it waits out B's offer (100 ms from the release), then takes the name, B's
      // ask dropped — far from the 5 s lease a dead holder would cost.
      const next = await run('a', { op: 'acquire', name, waitMs: 3000, staleMs: 5000 });
      assert.equal(next.held, true, JSON.stringify(next));
      assert.ok(next.ms < 1000, `taken after ${next.ms} ms`);
      const after = await run('b', { op: 'read', name });
      assert.equal(after.record.asks, undefined, 'the lapsed ask is gone');
    },
  },
  {
    name: 'a dead holder whose clock ran an hour ahead is taken over after about one lease of watching',
    async run(run, tag) {
      const name = `ahead-${tag}`;
      const dead = await run('a', { op: 'acquire', name, staleMs: 300, ahead: HOUR, die: true });
      assert.equal(dead.held, true);
      const taker = await run('b', { op: 'acquire', name, staleMs: 300, waitMs: 3000 });
      assert.equal(taker.held, true, JSON.stringify(taker));
      assert.ok(taker.fence > dead.fence);
      // One lease of watching (300 ms), and at most a poll or two more — not an hour.
      assert.ok(taker.ms >= 290 && taker.ms < 1000, `taken over after ${taker.ms} ms`);
    },
  },
  {
    name: 'a taker 5 s fast leaves a live lease alone with maxClockSkewMs 6000, and takes it without',
    async run(run, tag) {
      const name = `fast-${tag}`;
      const holding = run('a', { op: 'acquire', name, staleMs: 2000, renewing: true, holdMs: 1500 });
      await sleep(100);
      const careful = await run('b', { op: 'acquire', name, staleMs: 2000, waitMs: 800, ahead: 5000, maxClockSkewMs: 6000 });
      assert.equal(careful.held, false, `the live lease was taken: ${JSON.stringify(careful)}`);
      const held = await holding;
      assert.equal(held.held, true);
      assert.equal(held.lost, false, 'the holder kept its lease');
      // The same taker without the skew allowed: the record looks 5 s old to it.
      const other = `${name}-unsafe`;
      // It holds past its first renewal (at staleMs / 3, 667 ms, more than 500 ms before the
      // hold ends), which finds the record taken over.
      const live = run('a', { op: 'acquire', name: other, staleMs: 2000, renewing: true, holdMs: 1200 });
      await sleep(50);
      const hasty = await run('b', { op: 'acquire', name: other, staleMs: 2000, waitMs: 0, ahead: 5000 });
      assert.equal(hasty.held, true, 'without maxClockSkewMs a 5 s fast clock takes a live lease over');
      assert.equal((await live).lost, true, 'and the holder lost it');
    },
  },
  {
    name: 'a staleMs 300 taker leaves a renewing staleMs 3000 holder alone',
    async run(run, tag) {
      const name = `longer-${tag}`;
      const holding = run('a', { op: 'acquire', name, staleMs: 3000, renewing: true, holdMs: 1500 });
      await sleep(100);
      const taker = await run('b', { op: 'acquire', name, staleMs: 300, waitMs: 1000 });
      assert.equal(taker.held, false, `taken: ${JSON.stringify(taker)}`);
      const held = await holding;
      assert.equal(held.lost, false);
      const { record } = await run('b', { op: 'read', name });
      assert.equal(record.state, 'free', 'released at the end');
    },
  },
  {
    name: 'two renewals at one clock reading write different records over a store whose version is the value',
    async run(run, tag) {
      const name = `frozen-${tag}`;
      const { records, renewed } = await run('a', { op: 'renewals', name, staleMs: 2000, frozen: 1_000_000, store: 'values' });
      assert.deepEqual(renewed, [true, true]);
      const texts = records.map((record) => JSON.stringify(record));
      assert.equal(new Set(texts).size, texts.length, `a write repeated a record: ${texts.join(' ')}`);
      assert.deepEqual(records.map((record) => record.at), [1_000_000, 1_000_001, 1_000_002, 1_000_003]);
      assert.deepEqual(records.map((record) => record.state), ['held', 'held', 'held', 'free']);
    },
  },
  {
    name: 'a create whose answer was lost still holds: the other isolate finds it held, then free after the release',
    async run(run, tag) {
      const name = `lost-create-${tag}`;
      // Held 600 ms: B looks about 100 ms in, with 500 ms to spare.
      const holding = run('a', { op: 'acquire', name, holdMs: 600, script: { lose: { method: 'create', nth: 1 } } });
      await sleep(100);
      const other = await run('b', { op: 'acquire', name, waitMs: 0 });
      assert.equal(other.held, false, 'the create took: the name is held');
      const held = await holding;
      assert.equal(held.held, true, JSON.stringify(held));
      const after = await run('b', { op: 'acquire', name, waitMs: 0 });
      assert.equal(after.held, true, 'released, not left held until stale');
      assert.ok(after.fence > held.fence);
    },
  },
  {
    name: 'a takeover whose answer was lost still holds, with the fence above the dead holder',
    async run(run, tag) {
      const name = `lost-takeover-${tag}`;
      const dead = await run('a', { op: 'acquire', name, staleMs: 100, die: true });
      await sleep(150);
      const taker = await run('b', { op: 'acquire', name, staleMs: 100, waitMs: 500, script: { lose: { method: 'replace', nth: 1 } } });
      assert.equal(taker.held, true, JSON.stringify(taker));
      assert.ok(taker.fence > dead.fence, `${taker.fence} > ${dead.fence}`);
      const { record } = await run('a', { op: 'read', name });
      assert.equal(record.state, 'free');
      assert.equal(record.fence, taker.fence, 'the fence it wrote, though the answer was lost');
    },
  },
  {
    name: 'a renewal whose answer was lost counts: renew() answers true and the lease moved',
    async run(run, tag) {
      const name = `lost-renewal-${tag}`;
      const { records, renewed } = await run('a', { op: 'renewals', name, staleMs: 2000, frozen: 5000, script: { lose: { method: 'replace', nth: 1 } } });
      assert.deepEqual(renewed, [true, true]);
      assert.deepEqual(records.map((record) => record.at), [5000, 5001, 5002, 5003]);
    },
  },
  {
    name: 'a release whose answer was lost counts: the other isolate takes the name at once',
    async run(run, tag) {
      const name = `lost-release-${tag}`;
      const held = await run('a', { op: 'acquire', name, holdMs: 10, script: { lose: { method: 'replace', nth: 1 } } });
      assert.equal(held.held, true);
      const { record } = await run('b', { op: 'read', name });
      assert.equal(record.state, 'free');
      const next = await run('b', { op: 'acquire', name, waitMs: 0 });
      assert.equal(next.held, true);
    },
  },
  {
    name: 'a store that never answers fails the acquisition within waitMs plus storeTimeoutMs',
    async run(run, tag) {
      const name = `hung-${tag}`;
      const holder = await run('a', { op: 'acquire', name, staleMs: 5000, die: true });
      assert.equal(holder.held, true);
      // Its read hangs: the acquisition fails at storeTimeoutMs (500 ms); the bound leaves 450 ms
      // to spare, and a second bound call (1 000 ms) past it.
      const hung = await run('b', { op: 'acquire', name, waitMs: 100, storeTimeoutMs: 500, script: { hang: ['read'] } });
      assert.equal(hung.error, 'LockStoreError', JSON.stringify(hung));
      assert.ok(hung.ms >= 490 && hung.ms < 100 + 500 + 350, `settled after ${hung.ms} ms`);
      // A create and its read-back hang: it fails at about waitMs plus storeTimeoutMs (600 ms).
      const create = await run('b', { op: 'acquire', name: `${name}-create`, waitMs: 100, storeTimeoutMs: 500, script: { hang: ['create', 'read'] } });
      assert.equal(create.error, 'LockStoreError');
      assert.ok(create.ms < 100 + 500 + 350, `settled after ${create.ms} ms (a create, then its read-back, both hung)`);
    },
  },
  {
    name: 'an abort during a hung store call rejects at once',
    async run(run, tag) {
      const name = `abort-${tag}`;
      const aborted = await run('a', { op: 'acquire', name, waitMs: 5000, storeTimeoutMs: 5000, abortAfterMs: 50, script: { hang: ['create'] } });
      assert.equal(aborted.error, 'AbortError', JSON.stringify(aborted));
      // At the abort (50 ms), not at the store call's bound (5 s).
      assert.ok(aborted.ms >= 45 && aborted.ms < 500, `rejected after ${aborted.ms} ms`);
    },
  },
];
