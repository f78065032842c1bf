// One isolate's side of the lease-rule scenarios (lease-scenarios.mjs): each op takes the
// package's lock API of one instance and that isolate's stores, does one thing to a lock, and
// answers what it saw as plain JSON. Node runs the ops on two instances of the package
// (lease-rules.test.mjs); workerd runs them in two isolates behind fetch
// (tests/workerd/lease-worker.mjs). No Node API here: workerd imports this file too.

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * `store` with one call scripted: the `nth` call (from 1) of `method` applies, then throws (its
 * answer was lost); every call of a method in `hang` never answers. It tells changes when
 * `store` does, unless `polls`.
 */
export function scripted(store, { lose, hang = [], polls = false } = {}) {
  let calls = 0;
  const call = async (method, args) => {
    if (hang.includes(method)) return new Promise(() => {});
    const answer = await store[method](...args);
    if (lose?.method === method && ++calls === lose.nth) throw new Error(`the answer to ${method} was lost`);
    return answer;
  };
  const wrapper = {
    create: (...args) => call('create', args),
    read: (...args) => call('read', args),
    replace: (...args) => call('replace', args),
  };
  if (typeof store.changed === 'function' && !polls) wrapper.changed = (...args) => call('changed', args);
  return wrapper;
}

/** The lock options of a step: its clock (`ahead` of this isolate's, or `frozen` at a time). */
function lockOptions(step) {
  const { waitMs, staleMs, maxClockSkewMs, storeTimeoutMs, ahead, frozen } = step;
  const now = frozen !== undefined ? () => frozen : ahead !== undefined ? () => Date.now() + ahead : undefined;
  return { waitMs, staleMs, maxClockSkewMs, storeTimeoutMs, now };
}

/** The record under `name`, parsed, or null. */
async function stored(store, name) {
  const found = await store.read(name);
  return found === null ? null : JSON.parse(found.value);
}

/**
 * The ops. `stores(kind)` is this isolate's store over the shared storage: `plain`, or `values`
 * (a store whose version is a hash of the value, or the value itself).
 */
export const OPS = {
  /**
   * Acquires `name`: holds it for `holdMs` (renewing, as withLock, when `renewing`) then
   * releases it, or never releases it (`die`: as a holder that crashed). `abortAfterMs` aborts
   * its signal. Answers whether it got the lock, its fence, how long the acquisition took, and
   * (released) the store calls of the whole op.
   */
  async acquire(api, stores, step) {
    const store = scripted(stores(step.store ?? 'plain'), step.script);
    const options = lockOptions(step);
    if (step.abortAfterMs !== undefined) {
      const controller = new AbortController();
      setTimeout(() => controller.abort(), step.abortAfterMs);
      options.signal = controller.signal;
    }
    const started = Date.now();
    let lock;
    try {
      lock = step.renewing
        ? await api.withLock(store, step.name, async (held) => {
            const fence = held.fence;
            const acquiredMs = Date.now() - started;
            await sleep(step.holdMs ?? 0);
            return { held: true, fence, ms: acquiredMs, lost: held.signal.aborted };
          }, options)
        : await api.acquireLock(store, step.name, options);
    } catch (error) {
      return { held: false, error: error.name, ms: Date.now() - started };
    }
    if (step.renewing) return lock;
    if (lock === undefined) return { held: false, ms: Date.now() - started };
    const result = { held: true, fence: lock.fence, ms: Date.now() - started };
    if (step.die) return result;
    await sleep(step.holdMs ?? 0);
    await lock.release();
    return { ...result, calls: api.lockStats(store).storeCalls };
  },

  /**
   * Acquires `name`, renews it twice, releases it: the record as stored after each write, and
   * what each renewal answered.
   */
  async renewals(api, stores, step) {
    const store = scripted(stores(step.store ?? 'plain'), step.script);
    const plain = stores(step.store ?? 'plain');
    const lock = await api.acquireLock(store, step.name, lockOptions(step));
    const records = [await stored(plain, step.name)];
    const renewed = [];
    for (let i = 0; i < 2; i++) {
      renewed.push(await lock.renew());
      records.push(await stored(plain, step.name));
    }
    await lock.release();
    records.push(await stored(plain, step.name));
    return { records, renewed, fence: lock.fence };
  },

  /** The record under `name`, as stored. */
  async read(api, stores, step) {
    return { record: await stored(stores(step.store ?? 'plain'), step.name) };
  },

  /** The counters of this isolate's locks over the store. */
  async stats(api, stores, step) {
    return api.lockStats(stores(step.store ?? 'plain'));
  },
};

/** Runs `step` (`{ op, ...arguments }`) in this isolate. */
export function runOp(api, stores, step) {
  const op = OPS[step.op];
  if (op === undefined) throw new TypeError(`no op ${step.op}`);
  return op(api, stores, step);
}
