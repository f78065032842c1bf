// The contract every LockStore passes on its real engine: create/read/replace semantics, racing
// creates and CASes, and lock contention over it. Plain checks that answer a list of failures,
// so any runtime runs it — Node (tests/js/stores.test.mjs), workerd, Deno — and reports JSON.
// `makeStore()` is called for each store object wanted: several objects over one backend stand
// for several isolates, each with its own lock manager. A store with the optional `changed`
// passes its part too.
const wait = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

export async function contract(makeStore, acquireLock) {
  const failures = [];
  const check = (ok, what) => ok || failures.push(what);
  const store = makeStore();
  const key = `contract-${crypto.randomUUID()}`;
  check((await store.read(key)) === null, 'read of a missing record is null');
  const v1 = await store.create(key, 'one');
  check(typeof v1 === 'string', 'create answers a version');
  check((await store.create(key, 'again')) === null, 'create of an existing record is null');
  const read = await store.read(key);
  check(read && read.value === 'one' && read.version === v1, 'read answers value and version');
  const v2 = await store.replace(key, v1, 'two');
  check(typeof v2 === 'string' && v2 !== v1, 'replace on the current version answers a new one');
  check((await store.replace(key, v1, 'stale')) === null, 'replace on an old version is null');
  check((await store.replace(`${key}-missing`, v2, 'x')) === null, 'replace of a missing record is null');
  const unicode = '{"token":"é ✓ \\u0000"}';
  const v3 = await store.replace(key, v2, unicode);
  const reread = await store.read(key);
  check(reread && reread.value === unicode && reread.version === v3, 'values round-trip unchanged');
  // Races: 20 creates, then 20 replaces on one version, from 4 store objects.
  const stores = Array.from({ length: 4 }, makeStore);
  const race = `race-${crypto.randomUUID()}`;
  const created = await Promise.all(Array.from({ length: 20 }, (_, i) => stores[i % 4].create(race, `c${i}`)));
  check(created.filter((v) => v !== null).length === 1, 'exactly one racing create wins');
  const { version } = await stores[0].read(race);
  const replaced = await Promise.all(Array.from({ length: 20 }, (_, i) => stores[i % 4].replace(race, version, `r${i}`)));
  check(replaced.filter((v) => v !== null).length === 1, 'exactly one racing replace wins');
  // Lock contention: 16 contenders over 4 store objects (4 local queues). A contender may wait
  // for every other one's rounds: over R2 through Miniflare on a busy machine that took 8 s
  // (and two waits of 5 s ran out), so each waits as long as the whole run may take.
  const name = `lock-${crypto.randomUUID()}`;
  let counter = 0;
  let holders = 0;
  let overlaps = 0;
  const fences = [];
  await Promise.all(
    Array.from({ length: 16 }, async (_, contender) => {
      for (let round = 0; round < 6; round++) {
        const lock = await acquireLock(stores[contender % 4], name, { waitMs: 60_000 });
        if (!lock) continue;
        holders += 1;
        if (holders > 1) overlaps += 1;
        fences.push(lock.fence);
        const seen = counter;
        await wait(1);
        counter = seen + 1;
        holders -= 1;
        await lock.release();
      }
    }),
  );
  check(overlaps === 0, 'no two holders at once');
  check(counter === fences.length, 'no lost update');
  check(fences.every((f, i) => i === 0 || f > fences[i - 1]), 'fences rise in hold order');
  check(fences.length === 96, `every round held the lock (${fences.length} of 96)`);
  if (typeof store.changed === 'function') await changedContract(stores, check, acquireLock);
  return failures;
}

/**
 * The optional `changed`, for a store that has it: from null, from another version and from the
 * current one; a write through another store object answers a wait in progress; and a lock
 * waiting in one store object is handed the name by a release in another, woken by it.
 */
async function changedContract(stores, check, acquireLock) {
  const [store, other] = stores;
  const key = `changed-${crypto.randomUUID()}`;
  check((await store.changed(key, null, 20)) === false, 'changed of an absent record from null is false after ms');
  const v1 = await other.create(key, 'one');
  check((await store.changed(key, null, 5000)) === true, 'changed from null is true once the record exists');
  check((await store.changed(key, `${v1}-not`, 5000)) === true, 'changed from another version is true');
  check((await store.changed(key, v1, 20)) === false, 'changed from the current version is false after ms, the record unchanged');
  const waiting = store.changed(key, v1, 10_000);
  await wait(30);
  check(typeof (await other.replace(key, v1, 'two')) === 'string', 'the write meanwhile applies');
  check((await waiting) === true, 'a write through another store object answers a changed in progress');
  const name = `changed-lock-${crypto.randomUUID()}`;
  const held = await acquireLock(stores[2], name);
  const asked = acquireLock(stores[3], name, { waitMs: 10_000 });
  await wait(50);
  await held.release();
  const lock = await asked;
  check(lock !== undefined && lock.fence > held.fence, 'a lock woken by changed takes the name the other store object released');
  await lock?.release();
}

