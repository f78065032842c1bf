// The lock benchmark: store calls and time per acquire+release, uncontended and with 16
// contenders in one isolate, for keyturn over MemoryStore and over a JS Map store, beside the
// seed's file lock (board-lock.ts, its `hasErrorCode` shimmed) on tmpfs when KEYTURN_BOARD_LOCK
// names it.
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

const here = dirname(fileURLToPath(import.meta.url));
const args = process.argv.slice(2);
const option = (name, fallback) => {
  const at = args.indexOf(`--${name}`);
  return at === -1 ? fallback : Number(args[at + 1]);
};
const rounds = option('rounds', 5000);
const holds = option('holds', 50);

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

/** The seed's lock, transpiled with esbuild, with `hasErrorCode` from its documented contract. */
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

// The seed's row only when KEYTURN_BOARD_LOCK names its board-lock.ts (it is not in this repository).
if (process.env.KEYTURN_BOARD_LOCK) {
  const shm = existsSync('/dev/shm') ? '/dev/shm' : tmpdir();
  const { module: seed, work } = await seedLock();
  try {
    const dir = await mkdtemp(join(shm, 'keyturn-board-'));
    const latency = await uncontended(() => seed.lockBoard(dir), (lock) => lock.release());
    const busy = await contended(() => seed.lockBoard(dir, { waitMs: 60000 }), (lock) => lock.release());
    rows.push([`seed board-lock.ts (file lock on ${shm})`, latency, NaN, busy.msPerHold * 1000, NaN]);
    await rm(dir, { recursive: true, force: true });
  } finally {
    await rm(work, { recursive: true, force: true });
  }
} else {
  console.log('(no seed row: set KEYTURN_BOARD_LOCK to the seed\'s board-lock.ts to add it)');
}

console.log(`lock: ${rounds} uncontended acquire+release (after ${rounds} untimed); 16 contenders × ${holds} holds on one name in one isolate; node ${process.version}`);
console.log('');
console.log('implementation                                 uncontended µs  calls   contended µs/hold  calls/acquisition');
for (const [label, latency, calls, perHold, callsPerHold] of rows) {
  const show = (n, digits) => (Number.isNaN(n) ? '—' : n.toFixed(digits));
  console.log(
    `${label.padEnd(46)} ${show(latency, 1).padStart(14)}  ${show(calls, 2).padStart(5)}   ${show(perHold, 1).padStart(17)}  ${show(callsPerHold, 2).padStart(17)}`,
  );
}
