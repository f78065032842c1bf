// The contract every LockStore passes, on its real engine: create/read/replace semantics, CAS
// races, and the randomized lock contention test over it. `makeStores(n)` returns n store
// objects over one backend — like n isolates sharing one store, each with its own lock manager.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';

import { acquireLock } from 'keyturn';

let unique = 0;
const fresh = (label) => `contract-${label}-${process.pid}-${Date.now()}-${unique++}`;

export function storeContract(label, makeStores) {
  test(`${label}: create only if absent, read, replace only on the current version`, async () => {
    const [store] = await makeStores(1);
    const key = fresh('basic');
    assert.equal(await store.read(key), null);
    const v1 = await store.create(key, 'one');
    assert.equal(typeof v1, 'string');
    assert.equal(await store.create(key, 'again'), null);
    assert.deepEqual(await store.read(key), { value: 'one', version: v1 });
    const v2 = await store.replace(key, v1, 'two');
    assert.equal(typeof v2, 'string');
    assert.notEqual(v2, v1);
    assert.equal(await store.replace(key, v1, 'stale'), null);
    assert.deepEqual(await store.read(key), { value: 'two', version: v2 });
    assert.equal(await store.replace(fresh('missing'), v2, 'x'), null);
    const unicode = '{"token":"é ✓ \\u0000"}';
    const v3 = await store.replace(key, v2, unicode);
    assert.deepEqual(await store.read(key), { value: unicode, version: v3 });
  });

  test(`${label}: of 20 racing creates and 20 racing replaces, exactly one wins each`, async () => {
    const stores = await makeStores(4);
    const key = fresh('race');
    const created = await Promise.all(Array.from({ length: 20 }, (_, i) => stores[i % 4].create(key, `c${i}`)));
    assert.equal(created.filter((v) => v !== null).length, 1);
    const { version } = await stores[0].read(key);
    const replaced = await Promise.all(Array.from({ length: 20 }, (_, i) => stores[i % 4].replace(key, version, `r${i}`)));
    assert.equal(replaced.filter((v) => v !== null).length, 1);
    const winner = replaced.findIndex((v) => v !== null);
    assert.deepEqual(await stores[1].read(key), { value: `r${winner}`, version: replaced[winner] });
  });

  test(`${label}: randomized lock contention, 16 contenders in 4 isolates`, async () => {
    const stores = await makeStores(4);
    const name = fresh('lock');
    let seed = 77;
    const random = () => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    let counter = 0;
    let holders = 0;
    let overlaps = 0;
    const fences = [];
    await Promise.all(
      Array.from({ length: 16 }, async (_, contender) => {
        for (let round = 0; round < 8; round++) {
          const lock = await acquireLock(stores[contender % 4], name, { waitMs: 3000, staleMs: 5000 });
          if (!lock) continue;
          holders += 1;
          if (holders > 1) overlaps += 1;
          fences.push(lock.fence);
          const seen = counter;
          await sleep(Math.floor(random() * 3));
          counter = seen + 1;
          holders -= 1;
          await lock.release();
        }
      }),
    );
    assert.equal(overlaps, 0, 'no two holders at once');
    assert.equal(counter, fences.length, 'no lost update');
    assert.ok(fences.every((f, i) => i === 0 || f > fences[i - 1]), 'fences rise in hold order');
    assert.ok(fences.length >= 120, `${fences.length} of 128 rounds held the lock`);
  });
}
