// SqliteStore: an uncontended acquire + release (`acquireLock`, then `release`) beside its floor —
// the engine's own two statements of that cycle (the CAS that takes the free record, the CAS that
// frees it: the store's UPDATE … RETURNING, with a record of keyturn's length) issued directly
// through the same query function, in plain JS. The two alternate cycle by cycle, the order
// swapped every cycle, so both see the same machine. On better-sqlite3 in memory and on a file
// (WAL), on libSQL on a file (WAL), and on D1 inside workerd (Miniflare). Then a hand-off, as
// bench/cross-isolate.mjs takes it: A holds a name 30 ms while B waits (two package instances,
// the ESM and the CommonJS entry, each with its own connection to one file): B's wait after A's
// release, and the store calls of the whole exchange. SqliteStore has no `changed`: B polls.
//
//   node bench/stores-sqlite.mjs [--rounds N]     (N cycles of each per engine; libSQL and D1 take N / 5)
//
// Not a test: it asserts nothing about speed.
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import Database from 'better-sqlite3';
import { createClient } from '@libsql/client';
import * as a from 'keyturn';
import { Miniflare } from 'miniflare';

import { numberOption } from './runtimes/options.mjs';
import { cycles } from './runtimes/sqlite-cycles.mjs';
import { handOff } from './runtimes/store-bench.mjs';
import { worker } from '../tests/runtimes/workerd.mjs';

const { acquireLock, lockStats, SqliteStore } = a;
const b = createRequire(import.meta.url)('keyturn');
const rounds = numberOption('rounds', 20000);
const handOffCycles = numberOption('cycles', 40);
const HOLD_MS = 30;
const dir = mkdtempSync(join(tmpdir(), 'keyturn-sqlite-bench-'));
const rows = [];
const handOffs = [];

/** A holds `name` (instance a, `storeA`) for HOLD_MS while B asks (b, `storeB`): B's wait after the release, in ms. */
const exchange = (storeA, storeB, name) => handOff(a, b, storeA, storeB, name, HOLD_MS);

/** `handOffCycles` hand-offs between a over `queryA` and b over `queryB` (one database): one row. */
async function handOffRow(label, queryA, queryB) {
  const storeA = new a.SqliteStore(queryA);
  const storeB = new b.SqliteStore(queryB);
  await storeA.setup();
  const calls = () => a.lockStats(storeA).storeCalls + b.lockStats(storeB).storeCalls;
  const waits = [];
  const spent = [];
  for (let i = 0; i < handOffCycles; i++) {
    const before = calls();
    waits.push(await exchange(storeA, storeB, `hand-off-${i}`));
    spent.push(calls() - before);
  }
  handOffs.push({ label, waits, spent });
}

/** better-sqlite3 as docs/stores.md shows it: each statement prepared once. */
function betterSqlite(db) {
  const statements = new Map();
  return (sql, params) => {
    let statement = statements.get(sql);
    if (statement === undefined) statements.set(sql, (statement = db.prepare(sql)));
    return statement.reader ? statement.all(...params) : statement.run(...params);
  };
}

try {
  for (const [label, file] of [['better-sqlite3, :memory:', ':memory:'], ['better-sqlite3, file (WAL)', join(dir, 'better.db')]]) {
    const db = new Database(file);
    db.pragma('journal_mode = WAL');
    rows.push([label, await cycles(betterSqlite(db), { SqliteStore, acquireLock, lockStats }, rounds)]);
    db.close();
  }

  const client = createClient({ url: `file:${join(dir, 'libsql.db')}`, timeout: 10_000 });
  await client.execute('PRAGMA journal_mode = WAL');
  const libsql = (c) => (sql, args) => c.execute({ sql, args }).then((r) => r.rows);
  rows.push(['libSQL, file: (WAL)', await cycles(libsql(client), { SqliteStore, acquireLock, lockStats }, Math.ceil(rounds / 5))]);

  const handOffFile = join(dir, 'hand-off.db');
  const [dbA, dbB] = [new Database(handOffFile), new Database(handOffFile)];
  dbA.pragma('journal_mode = WAL');
  await handOffRow('better-sqlite3, file (WAL), polls', betterSqlite(dbA), betterSqlite(dbB));
  dbA.close();
  dbB.close();
  const other = createClient({ url: `file:${join(dir, 'libsql.db')}`, timeout: 10_000 });
  await handOffRow('libSQL, file: (WAL), polls', libsql(client), libsql(other));
  other.close();
  client.close();

  const mf = new Miniflare({ ...worker('bench/runtimes/sqlite-bench-worker.mjs'), cf: false, d1Databases: ['DB'] });
  try {
    const response = await mf.dispatchFetch(`http://bench/?rounds=${Math.ceil(rounds / 5)}`);
    if (response.status !== 200) throw new Error(await response.text());
    rows.push(['D1 in workerd (Miniflare)', await response.json()]);
  } finally {
    await mf.dispose();
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}

console.log(`SqliteStore, node ${process.version}: uncontended acquire + release beside its two statements issued directly (median µs, alternating)`);
console.log('');
console.log('engine                          cycles  calls  keyturn µs  floor µs  ratio  | means: keyturn µs  floor µs  ratio');
const cell = (value, width, digits = 1) => value.toFixed(digits).padStart(width);
for (const [label, r] of rows) {
  console.log(
    `${label.padEnd(30)} ${String(r.rounds).padStart(7)} ${cell(r.calls, 6, 2)} ${cell(r.keyturnUs, 11)} ${cell(r.floorUs, 9)} ${cell(r.keyturnUs / r.floorUs, 5, 3)}×` +
      ` | ${cell(r.keyturnMeanUs, 17)} ${cell(r.floorMeanUs, 9)} ${cell(r.keyturnMeanUs / r.floorMeanUs, 5, 3)}×`,
  );
}
console.log('');
console.log('(workerd\'s clock moves in whole milliseconds and only across I/O: for D1 read the means.)');

const quantile = (values, q) => [...values].sort((x, y) => x - y)[Math.min(values.length - 1, Math.floor(q * values.length))];
console.log('');
console.log(`a hand-off: A holds ${HOLD_MS} ms while B waits; ${handOffCycles} cycles`);
console.log('engine                               B after the release, p50 ms  max ms  calls per exchange');
for (const { label, waits, spent } of handOffs) {
  console.log(`${label.padEnd(36)} ${quantile(waits, 0.5).toFixed(2).padStart(28)} ${quantile(waits, 1).toFixed(2).padStart(7)} ${quantile(spent, 0.5).toFixed(0).padStart(19)}`);
}
