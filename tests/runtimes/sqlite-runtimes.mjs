// Run by Bun (over bun:sqlite) and by Deno (over node:sqlite, which Node 20 lacks) from
// tests/js/sqlite-store.test.mjs: the store contract for SqliteStore, each driver's query
// written as the README writes it, on a database file in the directory given. Prints JSON.
import { contract } from './contract.mjs';

// Each runtime's entry of the package, as its users import it.
const { acquireLock, SqliteStore } = await import(typeof Bun === 'undefined' ? '../../pkg/deno.js' : '../../pkg/node.mjs');
const dir = typeof Bun === 'undefined' ? Deno.args[0] : process.argv[2];
let query;
let close;
if (typeof Bun !== 'undefined') {
  const { Database } = await import('bun:sqlite');
  const db = new Database(`${dir}/bun.db`);
  query = (sql, params) => db.query(sql).all(...params);
  close = () => db.close();
} else {
  const { DatabaseSync } = await import('node:sqlite');
  const db = new DatabaseSync(`${dir}/node-sqlite.db`);
  query = (sql, params) => db.prepare(sql).all(...params);
  close = () => db.close();
}
await new SqliteStore(query).setup();
const failures = await contract(() => new SqliteStore(query), acquireLock);
close();
console.log(JSON.stringify({ failures }));
