// A busy key across isolates: a holder A keeps `inFlight` works of 1 ms in flight on one key,
// while a caller B calls once every `everyMs`; each a serializer over the store. What B pays:
// its waits (from its call to its work's start), and the store calls of both per turn of B.
// A is another package instance in this process (`localHolder`), another process
// (`tests/runtimes/busy-holder-process.mjs`) or another workerd isolate: anything with
// `start()`, `calls()` and `stop()`. Shared by tests/js/cross-isolate.test.mjs,
// tests/js/cross-process.test.mjs and bench/cross-isolate.mjs. No Node API here: workerd
// imports this file too.

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * A's side: `inFlight` loops, each calling `serialize(name, work)` again as soon as its last call
 * settled (the workload of a busy key: every caller awaits its own result).
 * @param {(key: string, work: () => Promise<unknown>) => Promise<unknown>} serialize
 * @param {{ name?: string, inFlight?: number }} [options]
 */
export function busyLoops(serialize, { name = 'busy', inFlight = 4 } = {}) {
  let running = true;
  let turns = 0;
  const work = () => sleep(1);
  const loop = async () => {
    while (running) {
      await serialize(name, work);
      turns += 1;
    }
  };
  const loops = Array.from({ length: inFlight }, loop);
  return {
    /** Stops the loops: the turns they took, once their last calls settled. */
    async stop() {
      running = false;
      await Promise.all(loops);
      return turns;
    },
  };
}

/**
 * A holder in another package instance of this process: `api` is that instance, `store` its
 * store object.
 */
export function localHolder(api, store, { inFlight = 4 } = {}) {
  const serialize = api.createKeyedSerializer({ store, timeoutMs: 10_000 });
  let loops;
  return {
    async start() {
      loops = busyLoops(serialize, { inFlight });
    },
    async calls() {
      return api.lockStats(store).storeCalls;
    },
    stop: () => loops.stop(),
  };
}

/**
 * B's side against a busy holder: B calls every `everyMs` for `ms`. `callsOfB()` counts B's store
 * calls; the holder's `calls()` A's.
 * @param {{ holder: { start(): Promise<void>, calls(): Promise<number>, stop(): Promise<number> }, serializeB: Function, callsOfB: () => number, ms?: number, everyMs?: number }} options
 * @returns {Promise<{ waits: number[], turnsOfA: number, callsPerTurnOfB: number, callsOfBPerTurn: number }>}
 */
export async function busyKey({ holder, serializeB, callsOfB, ms = 3000, everyMs = 50 }) {
  await holder.start();
  await sleep(50); // A is busy before B first calls
  const waits = [];
  const beforeA = await holder.calls();
  const beforeB = callsOfB();
  const end = performance.now() + ms;
  const calls = [];
  while (performance.now() < end) {
    const called = performance.now();
    calls.push(
      serializeB('busy', async () => {
        waits.push(performance.now() - called);
        await sleep(1);
      }),
    );
    await sleep(everyMs);
  }
  await Promise.all(calls);
  const spentByB = callsOfB() - beforeB;
  const spent = (await holder.calls()) - beforeA + spentByB;
  const turnsOfA = await holder.stop();
  return { waits, turnsOfA, callsPerTurnOfB: spent / waits.length, callsOfBPerTurn: spentByB / waits.length };
}

/**
 * The same across two workerd isolates over Durable Objects: `mf` runs
 * tests/workerd/busy-worker.mjs as workers `a` (the busy holder, for `ms` and a little more, in
 * one request) and `b` (one request per call). B's waits are taken in its isolate, between its
 * call and its work's start (workerd's clock moves across the store's I/O).
 * @param {{ getWorker(name: string): Promise<{ fetch: Function }> }} mf
 * @param {{ polls?: boolean, ms?: number, everyMs?: number }} [options]
 */
export async function busyKeyInWorkerd(mf, { polls = false, ms = 3000, everyMs = 50 } = {}) {
  const [a, b] = [await mf.getWorker('a'), await mf.getWorker('b')];
  const post = async (worker, body) => {
    const response = await worker.fetch('http://worker/', { method: 'POST', body: JSON.stringify({ ...body, polls }) });
    if (response.status !== 200) throw new Error(`${response.status} ${await response.text()}`);
    return response.json();
  };
  const busy = post(a, { op: 'busy', ms: ms + 150 });
  await sleep(50);
  const before = (await post(b, { op: 'calls' })).calls;
  const waits = [];
  const calls = [];
  const end = performance.now() + ms;
  while (performance.now() < end) {
    calls.push(post(b, { op: 'call' }).then(({ waited }) => waits.push(waited)));
    await sleep(everyMs);
  }
  await Promise.all(calls);
  const spentByB = (await post(b, { op: 'calls' })).calls - before;
  const { turns, calls: spentByA } = await busy;
  return { waits, turnsOfA: turns, callsPerTurnOfB: (spentByA + spentByB) / waits.length, callsOfBPerTurn: spentByB / waits.length };
}

/**
 * What a busy machine may add to a wait measured on real time: its scheduling jitter (tens of
 * milliseconds, GC pauses of 30) ten times over. A bound on real-time waits leaves this much
 * room above what the package takes.
 */
export const BUSY_MACHINE_MS = 300;

/** The `q` quantile of `values` (0.5: the median, 1: the largest). */
export const quantile = (values, q) => [...values].sort((x, y) => x - y)[Math.min(values.length - 1, Math.floor(q * values.length))];
