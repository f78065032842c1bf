// Run by tests/js/timers.test.mjs in a child process: `node timer-scenarios.mjs <mode> <scenario>`.
// Runs one scenario in one mode, then prints the timers still active (what keeps the process
// alive) the moment its work is done; the parent times how long the process takes to exit. A
// deadline only guards its work, so it keeps no process alive (as `keyed-serializer.js`'s, the per-key serializer keyturn re-implements, does not): the
// scenarios that await one keep themselves alive meanwhile, as a server would be; the one that
// awaits a lock's wait does not, for that wait must keep the process alive by itself.
import { MODES } from './modes.mjs';

const [modeName, scenario] = process.argv.slice(2);
const { createKeyedSerializer, acquireLock, withLock, MemoryStore } = MODES.find((mode) => mode.name === modeName);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

const scenarios = {
  // Two serializers over one store each run a 5 ms work on one key: one waits for the other's lease.
  async 'two serializers over one store'() {
    const store = new MemoryStore();
    const a = createKeyedSerializer({ store, timeoutMs: 30_000 });
    const b = createKeyedSerializer({ store, timeoutMs: 30_000 });
    await Promise.all([a('k', () => sleep(5)), b('k', () => sleep(5))]);
  },
  // A serialized work over a store long enough to be renewed (twice: every 150 ms, each with
  // 300 ms of its lease to spare), well within its deadline; and one that times out.
  async 'a renewed turn and a timed-out one'() {
    const serialize = createKeyedSerializer({ store: new MemoryStore(), staleMs: 450, timeoutMs: 1000 });
    await serialize('k', () => sleep(400));
    await serialize('k', () => new Promise(() => {}), { timeoutMs: 200 }).catch(() => {});
  },
  // withLock beside a waiter that would wait a minute.
  async 'withLock beside a long waiter'() {
    const store = new MemoryStore();
    const held = withLock(store, 'n', () => sleep(5));
    const waiter = acquireLock(store, 'n', { waitMs: 60_000 });
    await held;
    await (await waiter).release();
  },
  // A waiter served after the holder's release, the holder's lease long.
  async 'a waiter served after a release'() {
    const store = new MemoryStore();
    const holder = await acquireLock(store, 'n', { staleMs: 60_000 });
    void holder.signal; // reading it arms its lease-end timer
    const waiter = acquireLock(store, 'n', { waitMs: 60_000, staleMs: 60_000 });
    await sleep(5);
    await holder.release();
    await (await waiter).release();
  },
  // Uncontended acquisitions and releases: a store call's bound keeps the process alive only
  // while the call is in flight.
  async 'uncontended acquisitions and releases'() {
    const store = new MemoryStore();
    for (let i = 0; i < 3; i++) await (await acquireLock(store, 'n')).release();
  },
  // A script whose top-level await waits for a lock held elsewhere: the wait keeps it alive.
  async 'a wait that keeps its script alive'() {
    const store = new MemoryStore();
    await acquireLock(store, 'n', { staleMs: 60_000 });
    const started = Date.now();
    if ((await acquireLock(store, 'n', { waitMs: 200 })) !== undefined) throw new Error('a live holder kept it');
    if (Date.now() - started < 190) throw new Error('the wait ended early');
  },
  // A plain serializer whose work outlived its deadline, and a caller that aborted a waiting work.
  async 'a deadline and an abort'() {
    const serialize = createKeyedSerializer({ timeoutMs: 30_000 });
    const controller = new AbortController();
    const first = serialize('k', () => sleep(5));
    const second = serialize('k', () => sleep(5), { signal: controller.signal });
    controller.abort();
    await first;
    await second.catch(() => {});
    await serialize('k', () => new Promise(() => {}), { timeoutMs: 20 }).catch(() => {});
  },
};

const keepAlive = scenario === 'a wait that keeps its script alive' ? undefined : setInterval(() => {}, 1000);
await scenarios[scenario]();
clearInterval(keepAlive);
console.log(JSON.stringify(process.getActiveResourcesInfo().filter((resource) => resource === 'Timeout')));
