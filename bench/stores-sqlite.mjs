// SqliteStore: an uncontended acquire + release (`acquireLock`, then `release`) beside its floor —
// the engine's own two statements of that cycle (the CAS that takes the free record, the CAS that
// frees it: the store's UPDATE … RETURNING, with a record of keyturn's length) issued directly
// through the same query function, in plain JS. The two alternate cycle by cycle, the order
// swapped every cycle, so both see the same machine. On better-sqlite3 in memory and on a file
// (WAL), on libSQL on a file (WAL), and on D1 inside workerd (Miniflare).
//
//   node bench/stores-sqlite.mjs [--rounds N]     (N cycles of each per engine; libSQL and D1 take N / 5)
//
// Not a test: it asserts nothing about speed.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import Database from 'better-sqlite3';
import { createClient } from '@libsql/client';
import { acquireLock, lockStats, SqliteStore } from 'keyturn';
import { Miniflare } from 'miniflare';

import { numberOption } from './runtimes/options.mjs';
import { cycles } from './runtimes/sqlite-cycles.mjs';
import { worker } from '../tests/runtimes/workerd.mjs';

const rounds = numberOption('rounds', 20000);
const dir = mkdtempSync(join(tmpdir(), 'keyturn-sqlite-bench-'));
const rows = [];

/** better-sqlite3 as the README shows it: each statement prepared once. */
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
  rows.push(['libSQL, file: (WAL)', await cycles((sql, args) => client.execute({ sql, args }).then((r) => r.rows), { SqliteStore, acquireLock, lockStats }, Math.ceil(rounds / 5))]);
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
