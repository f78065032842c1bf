// One turn of a fault-harness client, the same in a Node client process
// (redis-client-process.mjs, over Redis) and in a workerd client (workerd/client-worker.mjs, over
// Durable Objects): acquire a name with `withLock` or
// through the serializer over a store, do a fenced increment of the name's counter, release —
// each step in the history as a JSON event (see checker.mjs). Also the planted bugs of the
// harness's self-test.

/**
 * The store a client uses: `store` itself, or `store` with one bug planted (the harness's
 * self-test must find each):
 * - `release`: a release that frees without checking the token — its compare-and-set ignores
 *   the version when the record it writes is free, so it frees whatever holder is there — and
 *   one in four is sent twice (a retry), the second landing once another holds (within a
 *   lease, `staleMs`);
 * - `read-back`: a read-back that counts any record as its own — after a write that failed
 *   (one in four is lost before it reaches the store), the next read of that key shows the
 *   record holding what the failed write carried, whatever the store holds.
 * - `hog`: a holder that never hands on — its reads show records without the asks of the
 *   isolates waiting (so it never learns that anyone waits, and its writes drop their asks);
 *   it keeps its wake-ups.
 * - `slots`: a slot counted twice — the records of a semaphore name's slots are kept under keys
 *   of this client's own, so it holds a slot while another client holds the same.
 * (`skew`, a takeover that ignores skew, is planted through the options: see `leaseOptions`.)
 */
export function plantedStore(store, plant, staleMs, { id, semaphores = {} }) {
  if (plant === 'slots') {
    const own = (key) => (key.startsWith(SLOT_PREFIX) || key in semaphores ? `${key}:${id}` : key);
    return {
      create: (key, value) => store.create(own(key), value),
      read: (key) => store.read(own(key)),
      replace: (key, version, value) => store.replace(own(key), version, value),
      ...(store.changed === undefined ? {} : { changed: (key, version, ms) => store.changed(own(key), version, ms) }),
    };
  }
  if (plant === 'hog') {
    const withoutAsks = (record) => {
      if (record === null) return null;
      const { asks, ...rest } = JSON.parse(record.value);
      return { ...record, value: JSON.stringify(rest) };
    };
    return {
      create: (key, value) => store.create(key, value),
      replace: (key, version, value) => store.replace(key, version, value),
      read: async (key) => withoutAsks(await store.read(key)),
      ...(store.changed === undefined ? {} : { changed: (key, version, ms) => store.changed(key, version, ms) }),
    };
  }
  if (plant === 'release') {
    return {
      create: (key, value) => store.create(key, value),
      read: (key) => store.read(key),
      async replace(key, version, value) {
        if (JSON.parse(value).state !== 'free') return store.replace(key, version, value);
        const free = async () => {
          const current = await store.read(key);
          return current === null ? null : store.replace(key, current.version, value);
        };
        // One in four is sent again (a retry), and the second lands later, once another holds.
        if (Math.random() < 0.25) {
          (async () => {
            for (let waited = 0; waited < staleMs; waited += 5) {
              await new Promise((resolve) => setTimeout(resolve, 5));
              const current = await store.read(key).catch(() => null);
              if (current !== null && JSON.parse(current.value).state === 'held') return store.replace(key, current.version, value);
            }
          })().catch(() => {});
        }
        return free();
      },
    };
  }
  if (plant === 'read-back') {
    const failed = new Map(); // key → the value a failed write carried
    const lossy = (write) => async (key, ...rest) => {
      const value = rest.at(-1);
      if (Math.random() < 0.25) {
        failed.set(key, value);
        throw new Error('planted: the request was lost');
      }
      return write(key, ...rest);
    };
    return {
      create: lossy((key, value) => store.create(key, value)),
      replace: lossy((key, version, value) => store.replace(key, version, value)),
      async read(key) {
        const current = await store.read(key);
        const value = failed.get(key);
        failed.delete(key);
        return value === undefined || current === null ? current : { value, version: current.version };
      },
    };
  }
  return store;
}

/**
 * A client's store: `store` with its planted bug if any (`plantedStore`), recording when this
 * isolate's ask reached the store — an `asked` event { client, name, at } for each replace that
 * added an ask to the record it replaced, as the order check counts from it (checker.mjs).
 */
export function clientStore(store, { id, plant, staleMs, semaphores }, { emit, real, serializePrefix }) {
  const planted = plantedStore(store, plant, staleMs, { id, semaphores });
  const read = new Map(); // key → the record last read
  const asks = (value) => {
    try {
      return String(JSON.parse(value).asks ?? '').split(',').filter((ask) => ask !== '').map((ask) => ask.split(':')[0]);
    } catch {
      return [];
    }
  };
  // The name a record serves: a slot's past the first is `name#k`, as the turn names it.
  const name = (record) => {
    const [, slot, rest] = record.startsWith(SLOT_PREFIX) ? record.match(/^keyturn:slot:(\d+):(.*)$/) : [, undefined, record];
    const key = rest.startsWith(serializePrefix) ? `turns:${rest.slice(serializePrefix.length)}` : rest;
    return slot === undefined ? key : `${key}#${slot}`;
  };
  return {
    create: (key, value) => planted.create(key, value),
    async read(key) {
      const record = await planted.read(key);
      read.set(key, record);
      return record;
    },
    async replace(key, version, value) {
      const before = read.get(key);
      const written = await planted.replace(key, version, value);
      if (written !== null && before?.version === version) {
        const had = new Set(asks(before.value));
        if (asks(value).some((ask) => !had.has(ask))) await emit({ kind: 'asked', client: id, name: name(key), at: real() });
      }
      return written;
    },
    ...(planted.changed === undefined ? {} : { changed: (key, version, ms) => planted.changed(key, version, ms) }),
  };
}

/** The key prefix of a semaphore name's slot records past the first (the crate's `SLOT_PREFIX`). */
const SLOT_PREFIX = 'keyturn:slot:';

/**
 * The name a turn holds, as the history names it: a semaphore name's slot `k` is `name#k`
 * (judged as a name of its own, and counted with its group's other slots), slot 0 of one too.
 * @param {string} name
 * @param {number} slots the name's concurrency
 * @param {number} slot
 */
const slotted = (name, slots, slot) => (slots > 1 ? `${name}#${slot}` : name);

/** The lease options of a client: `skew` plants a takeover that ignores clock skew. */
export const leaseOptions = ({ staleMs, maxClockSkewMs, storeTimeoutMs, plant }) => ({
  staleMs,
  storeTimeoutMs,
  maxClockSkewMs: plant === 'skew' ? 0 : maxClockSkewMs,
});

/**
 * A client's turn on a name. `api` is keyturn's; `serialize` the client's serializer over the
 * store (serializer mode) or undefined (withLock mode); `write(resource, fence, token)` the
 * fenced increment, answering 'ok', 'refused' or 'info' (answer lost); `real()` the machine's
 * shared clock; `now()` the client's own (skewed) clock; `emit(event)` records an event, and
 * is awaited: an event is on record before the step after it (a write) is sent.
 */
export function makeTurn({ api, store, serialize, write, real, now, emit, config }) {
  const { id, waitMs } = config;
  const lease = { ...leaseOptions(config), waitMs, now };
  const slotsOf = (name) => config.semaphores?.[name] ?? 1;
  const increment = async (resource, fence, token) => {
    // Invoked, then answered: a client killed or disposed in between leaves it indeterminate.
    await emit({ kind: 'invoke', client: id, resource: `counter:${resource}`, token, fence });
    const outcome = await write(`counter:${resource}`, fence, token);
    await emit({ kind: 'write', client: id, resource: `counter:${resource}`, token, fence, outcome, at: real() });
  };
  return async function turn(name) {
    const asked = real();
    const slots = slotsOf(name);
    // A semaphore name's turns: each slot judged as a name of its own, and counted in its group.
    const group = slots > 1 ? { group: name, slots } : {};
    if (serialize !== undefined) {
      // Its turns hold the lease named `SERIALIZE_PREFIX + name`: fences of their own, and a
      // counter of their own. A turn's lease is not visible here, so turns are judged by fences;
      // a paced name's works by their starts too, and by their spans: a work holds its lease
      // from its start until it ends, or until its signal says the lease (or deadline) is gone.
      const rate = config.paced?.name === name ? { limit: config.paced.limit, periodMs: config.paced.periodMs } : undefined;
      await serialize(name, async (signal, { fence, slot }) => {
        // Read first: the pace judged is the start's, which the serializer stamped just before.
        const at = real();
        const clock = now();
        const resource = slotted(`turns:${name}`, slots, slot);
        const token = `${id}/${fence}`;
        const turnGroup = slots > 1 ? { group: `turns:${name}`, slots } : {};
        if (rate === undefined) {
          await emit({ kind: 'acquired', client: id, name: resource, token, fence, at, heldUntil: at, waitedMs: at - asked, ...turnGroup });
          await increment(resource, fence, token);
          return;
        }
        let abortedAt;
        signal.addEventListener('abort', () => (abortedAt = real()), { once: true });
        await emit({ kind: 'acquired', client: id, name: resource, token, fence, at, clock, rate, waitedMs: at - asked });
        await increment(resource, fence, token);
        await emit({ kind: 'ended', client: id, token, at: real(), ...(abortedAt === undefined ? {} : { abortedAt }) });
      }, rate);
      return;
    }
    await api.withLock(store, name, async (lock) => {
      const held = slotted(name, slots, lock.slot);
      const at = real();
      await emit({ kind: 'acquired', client: id, name: held, token: lock.token, fence: lock.fence, at, heldUntil: at + (lock.heldUntil - now()), waitedMs: at - asked, ...group });
      await increment(held, lock.fence, lock.token);
      // Not awaited: the release begins now (a lost event only makes the lease count longer).
      emit({ kind: 'released', client: id, name: held, token: lock.token, at: real() });
    }, { ...lease, concurrency: slots });
  };
}

/**
 * A client's callers, `config.inFlight` of them (1 by default), each taking `turn`s of `names`
 * in turn until SIGTERM; a turn that fails is recorded. A client thinks between turns, as a
 * service between requests; a busy one (several callers) calls again at once, so its works of a
 * name always queue behind each other. With `paced` (a serializer client's `config.paced`), one
 * more caller takes the paced name only. Resolves once every caller stopped.
 * @param {(name: string) => Promise<void>} turn
 * @param {string[]} names
 * @param {{ id: string, emit: (event: object) => unknown, inFlight?: number, paced?: { name: string } }} client
 */
export async function runCallers(turn, names, { id, emit, inFlight = 1, paced }) {
  let stopping = false;
  process.on('SIGTERM', () => {
    stopping = true;
  });
  const busy = inFlight > 1;
  let ops = 0;
  const caller = async () => {
    while (!stopping) {
      const name = names[ops++ % names.length];
      try {
        await turn(name);
      } catch (error) {
        emit({ kind: 'failed', client: id, name, error: error?.name ?? String(error) });
      }
      await new Promise((resolve) => setTimeout(resolve, busy ? 0 : 5 + Math.random() * 25));
    }
  };
  // A paced name has a caller of its own, which calls again at once: its pace always binds.
  const pacedCaller = async () => {
    while (!stopping) {
      try {
        await turn(paced.name);
      } catch (error) {
        emit({ kind: 'failed', client: id, name: paced.name, error: error?.name ?? String(error) });
        await new Promise((resolve) => setTimeout(resolve, 5)); // a store away: no spinning
      }
    }
  };
  await Promise.all([...Array.from({ length: inFlight }, caller), ...(paced === undefined ? [] : [pacedCaller()])]);
}

/**
 * The serializer of a serializer-mode client (its records carry the machine's clock): one per
 * concurrency its names are taken at, and one with the paced name's `rate`.
 */
export function makeSerializer(api, store, config) {
  if (config.mode !== 'serializer') return undefined;
  const serializers = new Map();
  return (name, work, rate) => {
    const concurrency = config.semaphores?.[name] ?? 1;
    const which = rate === undefined ? concurrency : 'paced';
    let serialize = serializers.get(which);
    if (serialize === undefined) {
      serialize = api.createKeyedSerializer({ ...leaseOptions(config), store, concurrency, timeoutMs: config.waitMs + config.staleMs, ...(rate === undefined ? {} : { rate }) });
      serializers.set(which, serialize);
    }
    return serialize(name, work);
  };
}
