// PostgresStore on a postgresql server of its own (a loopback port, stopped by PID at the end),
// through one pg Pool, and on PGlite in this process:
// - an uncontended acquire + release (`acquireLock`, then `release`) beside the floor: the two
//   statements the store issues for it, sent directly through the same client with the same
//   parameters — alternating pair by pair (the order swapped every round), so both see the
//   same machine — on one name (two UPDATEs) and on a new name each cycle (INSERT, UPDATE);
// - a hand-off to another package instance after a 30 ms hold, with `listen` and without
//   (polling): from the holder's `release()` call to the waiter's acquisition answered.
//
//   node bench/stores-postgres.mjs
//
// Not a test: it asserts nothing about speed.
import { createRequire } from 'node:module';
import { setTimeout as sleep } from 'node:timers/promises';

import { PGlite } from '@electric-sql/pglite';
import { acquireLock, lockStats, PostgresStore } from 'keyturn';

import { pgListener, pgPool } from '../tests/runtimes/postgres-clients.mjs';
import { startPostgresServer } from '../tests/runtimes/postgres-server.mjs';

const other = createRequire(import.meta.url)('keyturn');
const CYCLES = 4000;
const HANDOFFS = 100;

const quantile = (samples, q) => [...samples].sort((a, b) => a - b)[Math.min(samples.length - 1, Math.floor(samples.length * q))];

/**
 * The uncontended cycle over `query`, beside its floor. The store's statements for one cycle
 * are caught from a cycle run first (a spy around `query`); the floor then sends those two
 * statements itself, each with a fresh version as the store's own would carry, on a key of
 * its own that it keeps as the lock keeps its own. `fresh`: each cycle on a name never used
 * (the create's INSERT, then the release's UPDATE); else on one name, its record free and its
 * version known (two UPDATEs: the steady state).
 */
async function uncontended(label, query, fresh) {
  const table = `bench_${label.toLowerCase().replace(/[^a-z]/g, '')}_${fresh ? 'fresh' : 'one'}`;
  const nameOf = (i) => (fresh ? `lock-${i}` : 'lock');
  const floorKey = (i) => (fresh ? `floor-${i}` : 'floor');
  /** @type {{ text: string, params: unknown[] }[] | undefined} */
  let caught;
  const spied = (text, params) => {
    caught?.push({ text, params: [...params] });
    return query(text, params);
  };
  const store = new PostgresStore(spied, { table });
  await store.setup();
  // Warm: the record exists and this instance knows its version, as in any steady state.
  for (let i = 0; i < 200; i++) await (await acquireLock(store, fresh ? `warm-${i}` : 'lock')).release();
  caught = [];
  await (await acquireLock(store, fresh ? 'caught' : 'lock')).release();
  const statements = caught;
  caught = undefined;
  if (statements.length !== 2) throw new Error(`an uncontended cycle made ${statements.length} statements`);
  // The floor's own record, a copy of the lock's: the same texts, values and parameter shapes.
  const [take, give] = statements;
  const creates = take.text.startsWith('INSERT');
  let version = creates ? undefined : take.params[1];
  if (!creates) await query(`INSERT INTO ${table} (key, value, version) VALUES ($1, $2, $3)`, ['floor', give.params[2], version]);
  let n = 0;
  const newVersion = () => `ffffffffffffffff${(++n).toString(16).padStart(16, '0')}`;
  let i = 0;
  const floorCycle = async () => {
    const key = floorKey(i);
    const held = newVersion();
    let rows = await query(take.text, creates ? [key, take.params[1], held] : [key, version, take.params[2], held, ...take.params.slice(4)]);
    if (rows.length !== 1) throw new Error('floor: take refused');
    const free = newVersion();
    rows = await query(give.text, [key, held, give.params[2], free, ...give.params.slice(4)]);
    if (rows.length !== 1) throw new Error('floor: release refused');
    version = free;
  };
  const keyturnCycle = async () => {
    const lock = await acquireLock(store, nameOf(i));
    await lock.release();
  };
  const calls = lockStats(store).storeCalls;
  const [ours, floor] = [[], []];
  for (; i < CYCLES; i++) {
    const pair = i % 2 === 0 ? [[ours, keyturnCycle], [floor, floorCycle]] : [[floor, floorCycle], [ours, keyturnCycle]];
    for (const [samples, cycle] of pair) {
      const started = performance.now();
      await cycle();
      samples.push(performance.now() - started);
    }
  }
  const perCycle = (lockStats(store).storeCalls - calls) / CYCLES;
  const [oursUs, floorUs] = [quantile(ours, 0.5) * 1000, quantile(floor, 0.5) * 1000];
  return { label: `${label}, ${fresh ? 'a new name each' : 'one name'}`, oursUs, floorUs, ratio: oursUs / floorUs, perCycle, statements: statements.map(({ text }) => text.split(' ').slice(0, 2).join(' ')) };
}

/**
 * Hand-offs after a 30 ms hold: `here` holds, `there` (another package instance) waits, woken
 * by `listen` or polling. From the holder's release() to the waiter's acquisition answered.
 */
async function handOffs(label, here, there) {
  const ms = [];
  const afterRelease = [];
  const calls = [];
  for (let i = 0; i < HANDOFFS; i++) {
    const name = `handoff-${i % 4}`;
    const held = await acquireLock(here, name);
    const before = other.lockStats(there).storeCalls;
    const asked = other.acquireLock(there, name, { waitMs: 10_000 });
    await sleep(30);
    const released = performance.now();
    await held.release();
    const answered = performance.now();
    const lock = await asked;
    ms.push(performance.now() - released);
    afterRelease.push(performance.now() - answered);
    calls.push(other.lockStats(there).storeCalls - before);
    await lock.release();
    await sleep(5);
  }
  const mean = calls.reduce((a, b) => a + b, 0) / calls.length;
  return { label, p50: quantile(ms, 0.5), p90: quantile(ms, 0.9), max: quantile(ms, 1), afterP50: quantile(afterRelease, 0.5), calls: mean };
}

const server = await startPostgresServer();
const rows = [];
const handoffRows = [];
const { query, end } = pgPool(server);
const listeners = [];
try {
  rows.push(await uncontended('postgresql 15 (pg)', query, false));
  rows.push(await uncontended('postgresql 15 (pg)', query, true));
  const table = 'handoffs';
  await new PostgresStore(query, { table }).setup();
  for (const listen of [true, false]) {
    const options = async () => {
      if (!listen) return { table };
      const listener = await pgListener(server);
      listeners.push(listener);
      return { table, listen: listener.listen };
    };
    const here = new PostgresStore(query, await options());
    const there = new other.PostgresStore(query, await options());
    handoffRows.push(await handOffs(`postgresql 15 (pg), ${listen ? 'listen' : 'polling'}`, here, there));
  }
} finally {
  await Promise.all(listeners.map((listener) => listener.end()));
  await end();
  await server.close();
}

const db = await PGlite.create();
try {
  const pglite = (text, params) => db.query(text, params).then((result) => result.rows);
  rows.push(await uncontended('PGlite (in process)', pglite, false));
  rows.push(await uncontended('PGlite (in process)', pglite, true));
} finally {
  await db.close();
}

console.log(`PostgresStore, node ${process.version}, pg 8.23.1, PGlite 0.5.17; ${CYCLES} cycles each, alternating`);
console.log('');
console.log('engine                                  acquire+release µs  calls  floor µs (its 2 statements)  ratio');
for (const r of rows) {
  console.log(`${r.label.padEnd(39)} ${r.oursUs.toFixed(1).padStart(18)}  ${r.perCycle.toFixed(2).padStart(5)}  ${r.floorUs.toFixed(1).padStart(27)}  ${r.ratio.toFixed(3)}×   (${r.statements.join(', ')})`);
}
console.log('');
console.log(`hand-off after a 30 ms hold, to another instance (${HANDOFFS} each): from release() called to the waiter's lock; and from release() answered`);
for (const r of handoffRows) {
  console.log(`${r.label.padEnd(30)} p50 ${r.p50.toFixed(2)} ms  p90 ${r.p90.toFixed(2)} ms  max ${r.max.toFixed(1)} ms  (after the release's answer: p50 ${r.afterP50.toFixed(2)} ms)  waiter's calls ${r.calls.toFixed(1)}`);
}
console.log(`load average ${(await import('node:os')).loadavg().map((x) => x.toFixed(2)).join(' ')} on ${(await import('node:os')).availableParallelism()} cores`);
