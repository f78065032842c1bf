// Times acquire+release over a store, inside whatever runtime runs it (Node, workerd, Deno):
// uncontended cycles, then 16 contenders × 25 holds on one name through one store object (one
// isolate's local queue). Counts store calls by wrapping the store.
const now = () => performance.now();

/** A store that counts the calls made to it. */
export class Counting {
  constructor(inner) {
    this.inner = inner;
    this.calls = 0;
  }
  create(key, value) {
    this.calls += 1;
    return this.inner.create(key, value);
  }
  read(key) {
    this.calls += 1;
    return this.inner.read(key);
  }
  replace(key, version, value) {
    this.calls += 1;
    return this.inner.replace(key, version, value);
  }
}

const median = (values) => [...values].sort((a, b) => a - b)[values.length >> 1];

export async function benchStore(makeStore, acquireLock, { cycles = 200, contenders = 16, holds = 25 } = {}) {
  const store = new Counting(makeStore());
  const name = `bench-${crypto.randomUUID()}`;
  const times = [];
  for (let i = 0; i < cycles; i++) {
    const started = now();
    const lock = await acquireLock(store, name);
    await lock.release();
    times.push(now() - started);
  }
  const uncontendedCalls = store.calls / cycles;
  const busy = new Counting(makeStore());
  const busyName = `bench-${crypto.randomUUID()}`;
  let held = 0;
  const started = now();
  await Promise.all(
    Array.from({ length: contenders }, async () => {
      for (let i = 0; i < holds; ) {
        const lock = await acquireLock(busy, busyName, { waitMs: 60000 });
        if (!lock) continue;
        held += 1;
        i += 1;
        await lock.release();
      }
    }),
  );
  return {
    uncontendedMedianUs: median(times) * 1000,
    uncontendedCalls,
    contendedUsPerHold: ((now() - started) / held) * 1000,
    contendedCallsPerAcquisition: busy.calls / held,
  };
}

/**
 * A hand-off between two package instances: A (`a`, over `storeA`) holds `name` for `holdMs`
 * while B (`b`, over `storeB`) asks; B's wait after A's release, in ms.
 * @param {{ acquireLock: Function }} a
 * @param {{ acquireLock: Function }} b
 */
export async function handOff(a, b, storeA, storeB, name, holdMs) {
  const held = await a.acquireLock(storeA, name);
  const asked = b.acquireLock(storeB, name, { waitMs: 1000 });
  await new Promise((resolve) => setTimeout(resolve, holdMs));
  const released = performance.now();
  await held.release();
  const lock = await asked;
  const waited = performance.now() - released;
  await lock.release();
  return waited;
}
