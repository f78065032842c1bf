// SqliteStore on real SQLite engines in this process: the store contract
// (tests/runtimes/contract.mjs) over better-sqlite3 — rows as objects and as arrays — and over
// libSQL with a `file:` database, over bun:sqlite in Bun and node:sqlite in Deno (Node 20 has
// none); docs/stores.md's example as written, and each driver's line of it as its test runs it; then what the store refuses: bad table names, bad answers and
// drivers that throw (each a LockStoreError, never a busy or a throw), a missing table, and a
// row that is not a keyturn record, which is never released. D1 and Durable Object SQL:
// tests/js/sqlite-workerd.test.mjs; two processes over one file: tests/js/sqlite-cross-process.test.mjs.
import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';

import Database from 'better-sqlite3';
import { createClient } from '@libsql/client';
import { acquireLock, LockStoreError, SqliteStore } from 'keyturn';

import { contract } from '../runtimes/contract.mjs';

const root = fileURLToPath(new URL('../..', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'keyturn-sqlite-'));
const keepAlive = setInterval(() => {}, 1000);
after(() => {
  clearInterval(keepAlive);
  rmSync(dir, { recursive: true, force: true });
});

/**
 * better-sqlite3 as docs/stores.md shows it: statements prepared once; `all` for those that answer
 * rows (every lock statement: RETURNING), `run` for the table's creation. With `raw`, rows are
 * arrays of columns.
 */
function betterSqlite(db, { raw = false } = {}) {
  const statements = new Map();
  return (sql, params) => {
    let statement = statements.get(sql);
    if (statement === undefined) {
      statement = db.prepare(sql);
      if (raw && statement.reader) statement.raw(true);
      statements.set(sql, statement);
    }
    return statement.reader ? statement.all(...params) : statement.run(...params);
  };
}

/** Waits until the wall clock reads past `ms`. */
async function clockPast(ms) {
  while (Date.now() <= ms) await sleep(1);
}

/** The contract over `stores` (store objects over one database), taken in turn. */
async function passesContract(stores) {
  let next = 0;
  assert.deepEqual(await contract(() => stores[next++ % stores.length], acquireLock), []);
}

describe('SqliteStore on better-sqlite3', () => {
  test('passes the store contract (rows as objects)', async () => {
    const db = new Database(join(dir, 'objects.db'));
    const query = betterSqlite(db);
    const stores = Array.from({ length: 4 }, () => new SqliteStore(query));
    await stores[0].setup();
    await passesContract(stores);
    db.close();
  });

  test('passes the store contract with rows as arrays (raw), in a table of its own name', async () => {
    const db = new Database(':memory:');
    const query = betterSqlite(db, { raw: true });
    const stores = Array.from({ length: 4 }, () => new SqliteStore(query, { table: 'Locks_2' }));
    await stores[0].setup();
    await passesContract(stores);
    const [{ n }] = db.prepare('SELECT count(*) AS n FROM Locks_2').all();
    assert.ok(n > 0, 'the records are rows of the named table');
    assert.equal(db.prepare("SELECT count(*) AS n FROM sqlite_schema WHERE name = 'keyturn_locks'").get().n, 0);
    db.close();
  });

  test('setup is idempotent and keeps the rows; construction does no I/O; a missing table is a LockStoreError', async () => {
    const db = new Database(':memory:');
    const calls = [];
    const query = betterSqlite(db);
    const counted = (sql, params) => {
      calls.push(sql);
      return query(sql, params);
    };
    const store = new SqliteStore(counted);
    assert.deepEqual(calls, [], 'constructing queried nothing');
    const error = await acquireLock(store, 'k').catch((e) => e);
    assert.ok(error instanceof LockStoreError, String(error));
    assert.match(error.message, /no such table: keyturn_locks/);
    await store.setup();
    const lock = await acquireLock(store, 'k');
    await lock.release();
    await store.setup();
    assert.equal(JSON.parse((await store.read('k')).value).fence, lock.fence, 'the record outlived a second setup');
    assert.match(calls[0], /^INSERT INTO "keyturn_locks" .* ON CONFLICT \("key"\) DO NOTHING RETURNING "version"$/);
    db.close();
  });

  test('a row that is not a keyturn record is never released or overwritten, and taken over only once unchanged for staleMs', async () => {
    const db = new Database(':memory:');
    const store = new SqliteStore(betterSqlite(db));
    await store.setup();
    const foreign = db.prepare('INSERT INTO keyturn_locks (key, value, version) VALUES (?, ?, ?)');
    foreign.run('k', '{"pid":1,"token":"the seed"}', 'v0');
    assert.equal(await acquireLock(store, 'k', { waitMs: 50, staleMs: 60_000 }), undefined, 'a foreign row is busy, not ours');
    assert.deepEqual(db.prepare('SELECT value, version FROM keyturn_locks WHERE key = ?').get('k'), { value: '{"pid":1,"token":"the seed"}', version: 'v0' });
    // Watched unchanged for the lease: taken over by CAS on its version.
    const lock = await acquireLock(store, 'k', { waitMs: 10_000, staleMs: 100 });
    assert.ok(lock !== undefined);
    // Something else writes the row meanwhile: our release leaves it as it is.
    db.prepare('UPDATE keyturn_locks SET value = ?, version = ? WHERE key = ?').run('overwritten by something else', 'v9', 'k');
    await lock.release();
    assert.deepEqual(db.prepare('SELECT value, version FROM keyturn_locks WHERE key = ?').get('k'), { value: 'overwritten by something else', version: 'v9' });
    db.close();
  });

  test('a row deleted between acquisitions: the next, a millisecond on, takes a fence above every one before, and a version never seen', async () => {
    const db = new Database(':memory:');
    const store = new SqliteStore(betterSqlite(db));
    await store.setup();
    const fences = [];
    const versions = new Set();
    for (let round = 0; round < 4; round++) {
      let lastAt;
      for (let i = 0; i < 3; i++) {
        const lock = await acquireLock(store, 'account-1');
        lastAt = Date.now();
        fences.push(lock.fence);
        versions.add((await store.read('account-1')).version);
        await lock.release();
      }
      db.prepare('DELETE FROM keyturn_locks WHERE key = ?').run('account-1'); // lost
      // A lost record's fences restart from the clock, in whole milliseconds: the promise is
      // for an acquisition after the last one's millisecond (docs/guarantees.md, "What the lock promises").
      await clockPast(lastAt);
    }
    assert.ok(fences.every((fence, i) => i === 0 || fence > fences[i - 1]), `${fences}`);
    assert.equal(versions.size, 12, 'no version came back after a delete');
  });
});

describe('SqliteStore on libSQL (file:)', () => {
  test('passes the store contract, over two clients of one file', async () => {
    const url = `file:${join(dir, 'libsql.db')}`;
    const clients = [createClient({ url, timeout: 10_000 }), createClient({ url, timeout: 10_000 })];
    const stores = Array.from({ length: 4 }, (_, i) => {
      const client = clients[i % 2];
      return new SqliteStore((sql, args) => client.execute({ sql, args }).then((result) => result.rows));
    });
    await stores[0].setup();
    await passesContract(stores);
    for (const client of clients) client.close();
  });
});

describe('SqliteStore refuses', () => {
  const query = () => [];

  test('a query that is not a function, an unknown option, a table name that is not a plain SQL name', () => {
    assert.throws(() => new SqliteStore(undefined), { name: 'TypeError', message: /query must be a function/ });
    assert.throws(() => new SqliteStore(query, { tabel: 'x' }), { name: 'TypeError', message: 'keyturn: options has no option tabel: did you mean table?' });
    assert.throws(() => new SqliteStore(query, { table: 5 }), { name: 'TypeError', message: /options\.table must be a string/ });
    for (const table of ['', 'two words', '1st', 'locks;drop table x', 'a"b', 'main.locks', 'sqlite_locks', 'SQLITE_x', '_cf_locks', 'é', 'x'.repeat(64)]) {
      assert.throws(() => new SqliteStore(query, { table }), (error) => error instanceof RangeError && error.message.includes('options.table') && error.message.includes(JSON.stringify(table)), table);
    }
    for (const table of ['keyturn_locks', 'Locks', '_locks', 'x'.repeat(63), 'select']) assert.ok(new SqliteStore(query, { table }));
    assert.ok(new SqliteStore(query, { table: undefined }));
  });

  test('a table name that is a keyword is quoted, so it works', async () => {
    const db = new Database(':memory:');
    const store = new SqliteStore(betterSqlite(db), { table: 'select' });
    await store.setup();
    const lock = await acquireLock(store, 'k');
    await lock.release();
    assert.equal(db.prepare('SELECT count(*) AS n FROM "select"').get().n, 1);
  });

  // What a driver may answer that is no answer: each method rejects with LockStoreError.
  const answers = [
    ['a D1 result object', { results: [], success: true }, /an object with results, success, not no row or one \(answer the rows: D1's `results`, libSQL's `rows`\)/],
    ['a libSQL ResultSet', { columns: [], rows: [] }, /an object with columns, rows/],
    ['undefined', undefined, /undefined, not no row or one/],
    ['a number', 1, /number, not no row or one/],
    ['two rows', [{ version: 'a', value: 'x' }, { version: 'b', value: 'y' }], /2 rows, not no row or one/],
    ['a row without the columns', [{}], /1 row, not/],
    ['a row of numbers', [{ value: 1, version: 2 }], /1 row, not/],
    ['null as a row', [null], /1 row, not/],
  ];
  for (const [label, answer, message] of answers) {
    test(`an answer that is ${label}: a LockStoreError from every method, and from acquireLock`, async () => {
      for (const sync of [true, false]) {
        const store = new SqliteStore(() => (sync ? answer : Promise.resolve(answer)));
        for (const call of [() => store.create('k', 'v'), () => store.read('k'), () => store.replace('k', 'v0', 'v')]) {
          await assert.rejects(call(), (error) => error instanceof LockStoreError && message.test(error.message), `${label}, ${sync ? 'sync' : 'async'}`);
        }
        const error = await acquireLock(store, 'k').catch((e) => e);
        assert.ok(error instanceof LockStoreError, String(error));
      }
    });
  }

  test('a write answered with a version it did not write is a LockStoreError, not a win', async () => {
    const store = new SqliteStore(() => [{ version: 'someone else' }]);
    await assert.rejects(store.create('k', 'v'), /SqliteStore\.create: the query answered 1 row, not the version it wrote/);
    await assert.rejects(store.replace('k', 'v0', 'v'), /SqliteStore\.replace: the query answered 1 row, not the version it wrote/);
  });

  test('a driver that throws, synchronously or by rejecting, is a LockStoreError carrying its error — never a throw', async () => {
    const cause = new Error('SQLITE_BUSY: database is locked');
    for (const query of [
      () => {
        throw cause;
      },
      () => Promise.reject(cause),
    ]) {
      const store = new SqliteStore(query);
      for (const call of [() => store.setup(), () => store.create('k', 'v'), () => store.read('k'), () => store.replace('k', 'v0', 'v')]) {
        let promise;
        assert.doesNotThrow(() => {
          promise = call();
        });
        await assert.rejects(promise, (error) => error instanceof LockStoreError && error.cause === cause && /database is locked/.test(error.message));
      }
      const error = await acquireLock(store, 'k').catch((e) => e);
      assert.ok(error instanceof LockStoreError && /database is locked/.test(error.message), String(error));
    }
  });

  test('values go as parameters: a key or value full of quotes is stored as it is', async () => {
    const db = new Database(':memory:');
    const store = new SqliteStore(betterSqlite(db));
    await store.setup();
    const key = `'); DROP TABLE keyturn_locks; --"`;
    const version = await store.create(key, `it's "quoted"`);
    assert.deepEqual(await store.read(key), { value: `it's "quoted"`, version });
    assert.equal(db.prepare('SELECT count(*) AS n FROM keyturn_locks').get().n, 1);
  });
});

describe('SqliteStore in other runtimes (tests/runtimes/sqlite-runtimes.mjs)', () => {
  const bun = join(root, 'node_modules/.bin/bun');
  const deno = join(root, 'node_modules/.bin/deno');
  const runs = [
    ['bun:sqlite in Bun', bun, [join(root, 'tests/runtimes/sqlite-runtimes.mjs'), dir]],
    ['node:sqlite in Deno', deno, ['run', '--quiet', '--no-prompt', `--allow-read=${root},${dir}`, `--allow-write=${dir}`, join(root, 'tests/runtimes/sqlite-runtimes.mjs'), dir]],
  ];
  for (const [label, binary, args] of runs) {
    test(`passes the store contract on ${label}`, { skip: !existsSync(binary) && `no ${binary} (npm ci installs it: a devDependency)` }, () => {
      const result = spawnSync(binary, args, {
        encoding: 'utf8',
        timeout: 300_000,
        env: { ...process.env, DENO_NO_UPDATE_CHECK: '1', NO_COLOR: '1', DENO_DIR: join(dir, 'deno-dir') },
      });
      assert.equal(result.status, 0, result.stderr);
      assert.deepEqual(JSON.parse(result.stdout.trim().split('\n').pop()), { failures: [] });
    });
  }
});

describe('docs/stores.md on SqliteStore', () => {
  const readme = readFileSync(join(root, 'docs/stores.md'), 'utf8');
  const [, code] = readme.match(/^```js sqlite\n([\s\S]*?)^```$/m) ?? [];

  test('its example runs as written over better-sqlite3 and prints what it says', () => {
    assert.ok(code, 'a ```js sqlite block');
    const project = mkdtempSync(join(dir, 'readme-'));
    symlinkSync(join(root, 'node_modules'), join(project, 'node_modules'));
    writeFileSync(join(project, 'example.mjs'), code);
    const result = spawnSync(process.execPath, ['example.mjs'], { cwd: project, encoding: 'utf8', timeout: 60_000 });
    assert.equal(result.status, 0, result.stderr);
    assert.equal(result.stdout, `${code.match(/console\.log\(.*\); \/\/ (.*)$/m)[1]}\n`);
    assert.ok(existsSync(join(project, 'locks.db')));
  });

  test('each driver\'s query in it is the one its test runs, word for word', () => {
    const runBy = {
      'D1': 'tests/workerd/sqlite-worker.mjs',
      'Durable Objects': 'tests/workerd/sqlite-worker.mjs',
      'libSQL / Turso': 'tests/runtimes/sqlite-keyturn-process.mjs',
      'node:sqlite': 'tests/runtimes/sqlite-runtimes.mjs',
      'bun:sqlite': 'tests/runtimes/sqlite-runtimes.mjs',
    };
    const lines = [...code.matchAll(/^\/\/ ([^:(]+(?::sqlite)?): +(\(sql.*)$/gm)].map(([, driver, query]) => [driver.trim(), query]);
    assert.deepEqual(lines.map(([driver]) => driver), Object.keys(runBy));
    for (const [driver, query] of lines) assert.ok(readFileSync(join(root, runBy[driver]), 'utf8').includes(query), `${driver}: ${query} in ${runBy[driver]}`);
  });
});
