// The lock benchmark: store calls and time per acquire+release, uncontended and with 16
// contenders in one isolate, for keyturn over MemoryStore and over a JS Map store; two floors
// (the cycle's two store calls in plain JS, unbounded and bounded); and the file lock keyturn
// re-implements (board-lock.ts, not in this repository; its `hasErrorCode` shimmed) on tmpfs when KEYTURN_BOARD_LOCK names it.
//
//   node bench/lock.mjs [--rounds N] [--holds N (per contender)]
//
// Not a test: it asserts nothing about speed.
import { mkdtemp, mkdir, copyFile, writeFile, rm } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { execFileSync } from 'node:child_process';

import { acquireLock, MemoryStore } from 'keyturn';

import { Counting as CountingStore } from './runtimes/store-bench.mjs';
import { numberOption } from './runtimes/options.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const rounds = numberOption('rounds', 5000);
const holds = numberOption('holds', 50);

class MapStore {
  constructor() {
    this.records = new Map();
    this.version = 0;
  }
  async create(key, value) {
    if (this.records.has(key)) return null;
    const version = String(++this.version);
    this.records.set(key, { value, version });
    return version;
  }
  async read(key) {
    return this.records.get(key) ?? null;
  }
  async replace(key, version, value) {
    if (this.records.get(key)?.version !== version) return null;
    const next = String(++this.version);
    this.records.set(key, { value, version: next });
    return next;
  }
}

/** board-lock.ts's lock, transpiled with esbuild, with `hasErrorCode` from its documented contract. */
async function seedLock() {
  const seed = process.env.KEYTURN_BOARD_LOCK;
  const work = await mkdtemp(join(tmpdir(), 'keyturn-seed-'));
  await mkdir(join(work, 'store'));
  await copyFile(seed, join(work, 'store', 'board-lock.ts'));
  await writeFile(
    join(work, 'errors.ts'),
    'export function hasErrorCode(e: unknown, code: string): boolean { return typeof e === "object" && e !== null && (e as { code?: unknown }).code === code; }\n',
  );
  const out = join(work, 'board-lock.mjs');
  execFileSync(join(here, '../node_modules/.bin/esbuild'), [join(work, 'store', 'board-lock.ts'), '--bundle', '--platform=node', '--format=esm', `--outfile=${out}`, '--log-level=warning']);
  return { module: await import(pathToFileURL(out).href), work };
}

const median = (values) => [...values].sort((a, b) => a - b)[values.length >> 1];

// The first `rounds` cycles warm the code up (V8 tiers wasm and JS up as they run) and are not
// timed: the median is of the `rounds` after them.
async function uncontended(acquire, release) {
  const times = [];
  for (let i = 0; i < 2 * rounds; i++) {
    const started = performance.now();
    const lock = await acquire();
    await release(lock);
    if (i >= rounds) times.push(performance.now() - started);
  }
  return median(times) * 1000;
}

async function contended(acquire, release, contenders = 16, each = holds) {
  let holds = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: contenders }, async () => {
      for (let i = 0; i < each; ) {
        const lock = await acquire();
        if (!lock) continue;
        holds += 1;
        i += 1;
        await release(lock);
      }
    }),
  );
  return { holds, msPerHold: (performance.now() - started) / holds };
}

const rows = [];
for (const [label, make] of [
  ['keyturn, MemoryStore', () => new CountingStore(new MemoryStore())],
  ['keyturn, JS Map store', () => new CountingStore(new MapStore())],
]) {
  let store = make();
  const latency = await uncontended(() => acquireLock(store, 'board'), (lock) => lock.release());
  const callsUncontended = store.calls / (2 * rounds);
  store = make();
  const busy = await contended(() => acquireLock(store, 'board', { waitMs: 60000 }), (lock) => lock.release());
  rows.push([label, latency, callsUncontended, busy.msPerHold * 1000, store.calls / busy.holds]);
}

// Two floors over MemoryStore: the two store calls of an uncontended cycle in plain JS, with a
// record of keyturn's length (a create once, then a CAS to hold and a CAS to free); and the same
// with each call bounded as a lock over a store that may hang must bound it — a promise that
// the answer or a shared timer settles, the call kept in a list the timer reads, the clock read.
// The second minus the first is what the bound alone costs a cycle.
{
  const record = (state, at) => `{"keyturn":1,"state":"${state}","token":"${'0'.repeat(32)}","fence":1,"at":${at},"lease":2000}`;
  const plain = (store) => ({
    version: undefined,
    async acquire() {
      const at = Date.now();
      this.version = this.version === undefined ? await store.create('board', record('held', at)) : await store.replace('board', this.version, record('held', at));
      return this;
    },
    async release() {
      this.version = await store.replace('board', this.version, record('free', Date.now()));
    },
  });
  // The least a bound takes: a promise that the answer or a shared timer settles, the call in a
  // list the timer reads (linked through the call itself, as flights.js does), the clock read.
  let first;
  let timer;
  const unlink = (call) => {
    if (call.previous !== undefined) call.previous.following = call.following;
    else if (first === call) first = call.following;
    else return false;
    if (call.following !== undefined) call.following.previous = call.previous;
    call.previous = undefined;
    call.following = undefined;
    return true;
  };
  const expire = () => {
    timer = undefined;
    const now = performance.now();
    for (let call = first, next; call !== undefined; call = next) {
      next = call.following;
      if (call.deadline <= now && unlink(call)) call.reject(new Error('timed out'));
    }
    let earliest = Infinity;
    for (let call = first; call !== undefined; call = call.following) earliest = Math.min(earliest, call.deadline);
    if (earliest !== Infinity) timer = setTimeout(expire, earliest - now).unref();
  };
  const bounded = (answer, ms) =>
    new Promise((resolve, reject) => {
      const call = { deadline: performance.now() + ms, reject, previous: undefined, following: first };
      if (first !== undefined) first.previous = call;
      first = call;
      timer ??= setTimeout(expire, ms).unref();
      answer.then(
        (value) => unlink(call) && resolve(value),
        (error) => unlink(call) && reject(error),
      );
    });
  const boundedStore = (store) => ({
    create: (key, value) => bounded(store.create(key, value), 2000),
    replace: (key, version, value) => bounded(store.replace(key, version, value), 2000),
  });
  for (const [label, lock] of [
    ['floor: the two calls in plain JS', plain(new MemoryStore())],
    ['floor: the two calls, each bounded', plain(boundedStore(new MemoryStore()))],
  ]) {
    const latency = await uncontended(() => lock.acquire(), () => lock.release());
    rows.push([label, latency, 2, NaN, NaN]);
  }
}

// board-lock.ts's row only when KEYTURN_BOARD_LOCK names it (it is not in this repository).
if (process.env.KEYTURN_BOARD_LOCK) {
  const shm = existsSync('/dev/shm') ? '/dev/shm' : tmpdir();
  const { module: seed, work } = await seedLock();
  try {
    const dir = await mkdtemp(join(shm, 'keyturn-board-'));
    const latency = await uncontended(() => seed.lockBoard(dir), (lock) => lock.release());
    const busy = await contended(() => seed.lockBoard(dir, { waitMs: 60000 }), (lock) => lock.release());
    rows.push([`board-lock.ts (file lock on ${shm})`, latency, NaN, busy.msPerHold * 1000, NaN]);
    await rm(dir, { recursive: true, force: true });
  } finally {
    await rm(work, { recursive: true, force: true });
  }
} else {
  console.log('(no board-lock.ts row: set KEYTURN_BOARD_LOCK to its path to add it)');
}

console.log(`lock: ${rounds} uncontended acquire+release (after ${rounds} untimed); 16 contenders × ${holds} holds on one name in one isolate; node ${process.version}`);
console.log('');
console.log('implementation                                 uncontended µs  calls   contended µs/hold  calls/acquisition');
for (const [label, latency, calls, perHold, callsPerHold] of rows) {
  const show = (n, digits) => (Number.isNaN(n) ? '—' : n.toFixed(digits));
  console.log(
    `${label.padEnd(46)} ${show(latency, 2).padStart(14)}  ${show(calls, 2).padStart(5)}   ${show(perHold, 1).padStart(17)}  ${show(callsPerHold, 2).padStart(17)}`,
  );
}
