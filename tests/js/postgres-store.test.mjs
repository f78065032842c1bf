// PostgresStore: its statements and answers over a scripted client; the store contract
// (tests/runtimes/contract.mjs) on a postgresql server this test starts (initdb into a
// temporary directory, a loopback port of its own, stopped by PID) through pg, and on PGlite in
// this process; setup, table names, a foreign row, and `changed` through LISTEN/NOTIFY — a write
// notifies only while someone waits, and a waiter in another package instance is woken by the
// release; and docs/stores.md's Postgres example, run as written against the server. Two processes
// over the server: tests/js/postgres-processes.test.mjs.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';

import { PGlite } from '@electric-sql/pglite';
import { acquireLock, LockStoreError, PostgresStore } from 'keyturn';

import { contract } from '../runtimes/contract.mjs';
import { pgListener, pgPool } from '../runtimes/postgres-clients.mjs';
import { havePostgresServer, startPostgresServer } from '../runtimes/postgres-server.mjs';
import { until } from './support.mjs';

const other = createRequire(import.meta.url)('keyturn');

/** The contract over `stores` (store objects over one database), taken in turn. */
function storeContract(label, makeStores) {
  test(`${label} passes the store contract`, async () => {
    const stores = await makeStores(4);
    let next = 0;
    assert.deepEqual(await contract(() => stores[next++ % stores.length], acquireLock), []);
  });
}

/** A rejection that is a LockStoreError whose message matches `pattern`, with a cause. */
const storeError = (pattern) => (error) => error instanceof LockStoreError && error.name === 'LockStoreError' && pattern.test(error.message) && error.cause !== undefined;

describe('PostgresStore over a scripted client', () => {
  /** A client answering `answer(text, params)`, each call kept in `calls`. */
  const scripted = (answer) => {
    const calls = [];
    const query = (text, params) => {
      calls.push({ text, params });
      return answer(text, params);
    };
    return { calls, query };
  };

  test('construction checks its arguments and does no I/O; no listen, no changed property', () => {
    const { calls, query } = scripted(async () => []);
    assert.throws(() => new PostgresStore('select'), (error) => error instanceof TypeError && /query/.test(error.message));
    assert.throws(() => new PostgresStore(query, { tabel: 'x' }), (error) => error instanceof TypeError && /tabel/.test(error.message) && /table/.test(error.message));
    assert.throws(() => new PostgresStore(query, { table: 42 }), (error) => error instanceof TypeError && /options\.table/.test(error.message));
    assert.throws(() => new PostgresStore(query, { listen: 'yes' }), (error) => error instanceof TypeError && /options\.listen/.test(error.message));
    for (const table of ['', 'Locks', 'locks;drop table x', 'a b', '1locks', 'a.b.c', '"locks"', 'locks-1', 'é', `x${'y'.repeat(63)}`, 'app.']) {
      assert.throws(() => new PostgresStore(query, { table }), (error) => error instanceof RangeError && /options\.table/.test(error.message), table);
    }
    for (const table of ['keyturn_locks', '_x', 'app.locks_2', 'x'.repeat(63)]) assert.ok(new PostgresStore(query, { table }));
    const plain = new PostgresStore(query);
    assert.equal('changed' in plain, false, 'no listen: no changed, and a lock over it polls');
    assert.equal(typeof new PostgresStore(query, { listen: async () => () => {} }).changed, 'function');
    assert.equal(calls.length, 0, 'construction made no call');
  });

  test('values go as parameters, never into the text; the table is the checked name, quoted', async () => {
    const { calls, query } = scripted(async () => []);
    const store = new PostgresStore(query, { table: 'app.locks' });
    const key = "k'); DROP TABLE x; --";
    const value = "v' || '";
    assert.equal(await store.create(key, value), null);
    assert.equal(await store.read(key), null);
    assert.equal(await store.replace(key, 'f'.repeat(32), value), null);
    await store.setup();
    for (const { text, params } of calls) {
      assert.ok(!text.includes(key) && !text.includes(value), text);
      assert.match(text, /"app"\."locks"/);
      assert.ok(params.every((param) => typeof param === 'string' || typeof param === 'number'));
    }
    assert.match(calls[0].text, /^INSERT .* ON CONFLICT \(key\) DO NOTHING RETURNING version$/);
    assert.deepEqual(calls[0].params.slice(0, 2), [key, value]);
    assert.match(calls[2].text, /^UPDATE .* WHERE key = \$1 AND version = \$2 RETURNING version/);
    assert.match(calls[3].text, /^CREATE TABLE IF NOT EXISTS/);
  });

  test('a write answers the version it sent: 32 hex digits, never the same twice', async () => {
    const { calls, query } = scripted(async (text, params) => [{ version: text.startsWith('INSERT') ? params[2] : params[3] }]);
    const store = new PostgresStore(query);
    const created = await store.create('a', 'v1');
    assert.match(created, /^[0-9a-f]{32}$/);
    const replaced = await store.replace('a', created, 'v2');
    assert.deepEqual(calls[1].params.slice(0, 4), ['a', created, 'v2', replaced]);
    const versions = new Set([created, replaced]);
    for (let i = 0; i < 100; i++) versions.add(await store.replace('a', created, 'v'));
    assert.equal(versions.size, 102);
    // Another store object: another id.
    const again = await new PostgresStore(query).create('a', 'v1');
    assert.notEqual(again.slice(0, 16), created.slice(0, 16));
  });

  test('an answer that is not the statement\'s rows, a client that throws or rejects: a LockStoreError, never a throw', async () => {
    let answer;
    const store = new PostgresStore((text, params) => answer(text, params));
    const calls = [() => store.create('a', 'v'), () => store.read('a'), () => store.replace('a', 'f'.repeat(32), 'v')];
    const wrongs = [
      [{ rows: [] }, /not an array of rows/],
      [null, /not an array of rows/],
      ['1', /not an array of rows/],
      [[{}], /(value|version) is undefined, not a string/],
      [[{ version: 1, value: 'v' }], /version is number/],
      [[{ version: 'a', value: 'v' }, { version: 'b', value: 'v' }], /2 rows/],
      [[null], /not an object/],
    ];
    for (const [reply, pattern] of wrongs) {
      answer = async () => reply;
      for (const call of calls) await assert.rejects(call(), storeError(pattern), JSON.stringify(reply));
    }
    answer = async () => [{ version: 'f'.repeat(32) }];
    await assert.rejects(store.read('a'), storeError(/value is undefined/), 'a read needs the value');
    await assert.rejects(store.create('a', 'v'), storeError(/not the one it was sent/));
    answer = () => {
      throw new Error('client gone');
    };
    for (const call of [...calls, () => store.setup()]) {
      let promise;
      assert.doesNotThrow(() => {
        promise = call();
      });
      await assert.rejects(promise, (error) => storeError(/client gone/)(error) && error.cause.message === 'client gone');
    }
    answer = async () => Promise.reject(Object.assign(new Error('relation "keyturn_locks" does not exist'), { code: '42P01' }));
    await assert.rejects(store.read('a'), storeError(/store\.setup\(\)/));
    // Through the lock: a LockStoreError, never a busy.
    answer = async () => ({ rows: [] });
    await assert.rejects(acquireLock(store, 'a'), (error) => error.name === 'LockStoreError');
    answer = async () => [];
    assert.equal(await store.read('a'), null);
  });

  test('changed: a listen that fails is a LockStoreError; the next wait listens again', async () => {
    let listens = 0;
    let fail = true;
    const store = new PostgresStore(async () => [], {
      listen: async () => {
        listens += 1;
        if (fail) throw new Error('no connection');
        return () => {};
      },
    });
    await assert.rejects(store.changed('a', null, 10), storeError(/no connection/));
    fail = false;
    assert.equal(await store.changed('a', null, 10), false, 'absent, and nothing created within 10 ms');
    assert.equal(listens, 2);
  });
});

/** Table names in use by one server or database, each test its own. */
let tables = 0;
const newTable = () => `locks_${++tables}`;

/** The tests run on each engine: `engine()` answers `{ query, listen() }` once it is up. */
function onEngine(label, engine) {
  test(`${label}: setup creates the table once, idempotent and racing; before it, every call is a LockStoreError that says so`, async () => {
    const { query } = engine();
    const table = newTable();
    const stores = Array.from({ length: 4 }, () => new PostgresStore(query, { table }));
    await assert.rejects(stores[0].read('a'), storeError(/does not exist.*store\.setup\(\)/));
    await assert.rejects(acquireLock(stores[0], 'a'), (error) => error.name === 'LockStoreError' && /setup/.test(error.message));
    await Promise.all(stores.map((store) => store.setup()));
    await stores[0].setup();
    const lock = await acquireLock(stores[1], 'a');
    assert.ok(lock.fence > 0);
    await lock.release();
  });

  test(`${label}: a row that is not a keyturn record is never released, nor taken before it stayed unchanged for a lease`, async () => {
    const { query } = engine();
    const table = newTable();
    const store = new PostgresStore(query, { table });
    await store.setup();
    await query(`INSERT INTO ${table} (key, value, version) VALUES ($1, $2, $3)`, ['foreign', 'a row of the app\'s own', 'v1']);
    // The lock reads it as held by someone it does not know: not free, and taken over only once
    // unchanged for a whole lease (the lock's rule for a record that is not ours).
    assert.equal(await acquireLock(store, 'foreign', { waitMs: 200, staleMs: 5000 }), undefined);
    assert.deepEqual(await query(`SELECT value, version FROM ${table} WHERE key = $1`, ['foreign']), [{ value: 'a row of the app\'s own', version: 'v1' }]);
    // A lock whose row became someone else's meanwhile: its release leaves that row alone.
    const lock = await acquireLock(store, 'mine');
    await query(`UPDATE ${table} SET value = $2, version = $3 WHERE key = $1`, ['mine', 'overwritten by the app', 'v9']);
    await lock.release().catch(() => {});
    assert.deepEqual(await query(`SELECT value, version FROM ${table} WHERE key = $1`, ['mine']), [{ value: 'overwritten by the app', version: 'v9' }]);
  });

  test(`${label}: a schema-qualified table, with listen: a waiter is woken`, async () => {
    const { query, listen } = engine();
    await query('CREATE SCHEMA IF NOT EXISTS app', []);
    const table = `app.${newTable()}`;
    const [a, b] = [new PostgresStore(query, { table, listen: await listen() }), new PostgresStore(query, { table, listen: await listen() })];
    await a.setup();
    const version = await a.create('k', 'one');
    const waiting = b.changed('k', version, 10_000);
    await sleep(20);
    await a.replace('k', version, 'two');
    assert.equal(await waiting, true);
  });

  test(`${label}: a replace notifies only while someone waits on the row`, async () => {
    const { query, listen } = engine();
    const table = newTable();
    const heard = [];
    const stopSpy = await (await listen())(table, (payload) => heard.push(payload));
    const store = new PostgresStore(query, { table, listen: await listen() });
    await store.setup();
    let version = await store.create('k', 'one');
    /** The spy's notifications up to a sentinel sent after what came before (NOTIFY keeps commit order). */
    const heardUpTo = async (sentinel) => {
      await query('SELECT pg_notify($1, $2)', [table, sentinel]);
      assert.equal(await until(() => heard.includes(sentinel), 10_000), true, 'the sentinel arrives');
      return heard.splice(0).filter((payload) => payload !== sentinel);
    };
    version = await store.replace('k', version, 'two');
    assert.deepEqual(await heardUpTo('s1'), [], 'nobody waits: no NOTIFY');
    const waiting = store.changed('k', version, 10_000);
    // The wait marks the row in the statement that reads it: a write after it notifies.
    assert.equal(await until(async () => (await query(`SELECT watched > now() AS marked FROM ${table} WHERE key = $1`, ['k']))[0].marked === true, 10_000), true);
    version = await store.replace('k', version, 'three');
    assert.equal(await waiting, true);
    assert.deepEqual(await heardUpTo('s2'), ['k'], 'a waiter: one NOTIFY, its key as payload');
    // A wait's mark ends with its bound: past it, no NOTIFY.
    let jv = await store.create('j', 'one');
    assert.equal(await store.changed('j', jv, 30), false);
    await sleep(30);
    jv = await store.replace('j', jv, 'two');
    assert.deepEqual(await heardUpTo('s3'), [], 'the wait is over: no NOTIFY');
    await stopSpy();
  });

  test(`${label}: with listen, a waiter in another package instance is woken by the release's NOTIFY, not by its watch running out`, async () => {
    const { query, listen } = engine();
    const table = newTable();
    const here = new PostgresStore(query, { table, listen: await listen() });
    const there = new other.PostgresStore(query, { table, listen: await listen() });
    await here.setup();
    for (let i = 0; i < 5; i++) {
      const before = other.lockStats(there);
      // A long lease and wait: unwoken, the waiter's one watch would last its whole wait (15 s).
      const held = await acquireLock(here, `k${i}`, { staleMs: 20_000 });
      const asked = other.acquireLock(there, `k${i}`, { staleMs: 20_000, waitMs: 15_000 });
      assert.equal(await until(() => other.lockStats(there).watches > before.watches, 10_000), true, 'the waiter watches');
      await sleep(30);
      const released = performance.now();
      await held.release();
      const lock = await asked;
      const ms = performance.now() - released;
      const after = other.lockStats(there);
      assert.ok(lock !== undefined && lock.fence > held.fence);
      assert.equal(after.wakeUps - before.wakeUps, 1, 'woken by the store');
      // About 3 ms idle; 1.5 s is a tenth of the watch it cut short, for a busy machine.
      assert.ok(ms < 1500, `handed over in ${ms.toFixed(1)} ms`);
      await lock.release();
    }
  });
}

describe('PostgresStore on a postgresql server', { skip: !havePostgresServer() && 'no postgresql server binaries (/usr/lib/postgresql/*/bin): scripts/setup.sh installs them' }, () => {
  let server;
  let pool;
  const listeners = [];
  before(async () => {
    server = await startPostgresServer();
    pool = pgPool(server, { max: 20 });
    await new PostgresStore(pool.query).setup();
  });
  after(async () => {
    await Promise.all(listeners.map((listener) => listener.end().catch(() => {})));
    await pool?.end().catch(() => {});
    await server?.close(); // by PID: only the server this test started
  });
  const listen = async () => {
    const listener = await pgListener(server);
    listeners.push(listener);
    return listener.listen;
  };

  storeContract('PostgresStore (pg)', async (n) => Array.from({ length: n }, () => new PostgresStore(pool.query)));
  storeContract('PostgresStore (pg) with listen', async (n) => {
    const stores = [];
    for (let i = 0; i < n; i++) stores.push(new PostgresStore(pool.query, { listen: await listen() }));
    return stores;
  });
  onEngine('pg', () => ({ query: pool.query, listen }));

  test('docs/stores.md\'s Postgres example runs as written against this server and prints what it says', () => {
    const [, code] = readFileSync(new URL('../../docs/stores.md', import.meta.url), 'utf8').match(/^```js postgres\n([\s\S]*?)^```$/m) ?? [];
    assert.ok(code, 'docs/stores.md has a `js postgres` block');
    // A directory of its own beside the repository's node_modules, as a project that installed pg.
    const dir = mkdtempSync(join(tmpdir(), 'keyturn-pg-readme-'));
    try {
      symlinkSync(fileURLToPath(new URL('../../node_modules', import.meta.url)), join(dir, 'node_modules'));
      writeFileSync(join(dir, 'example.mjs'), code);
      const run = spawnSync(process.execPath, ['example.mjs'], { cwd: dir, encoding: 'utf8', timeout: 60_000, env: { ...process.env, DATABASE_URL: server.url } });
      assert.equal(run.status, 0, run.stderr);
      const said = [...code.matchAll(/console\.log\(.*\); \/\/ (.*)$/gm)].map(([, what]) => what);
      assert.deepEqual(run.stdout.trim().split('\n'), said);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('PostgresStore on PGlite (in this process)', () => {
  let db;
  let query;
  before(async () => {
    db = await PGlite.create();
    query = (text, params) => db.query(text, params).then((result) => result.rows);
    await new PostgresStore(query).setup();
  });
  after(() => db?.close());
  // PGlite LISTENs on its one connection; a quoted channel keeps its name as it is.
  const listen = async () => (channel, onNotify) => db.listen(`"${channel}"`, onNotify);

  storeContract('PostgresStore (PGlite)', async (n) => Array.from({ length: n }, () => new PostgresStore(query)));
  storeContract('PostgresStore (PGlite) with listen', async (n) => {
    const stores = [];
    for (let i = 0; i < n; i++) stores.push(new PostgresStore(query, { listen: await listen() }));
    return stores;
  });
  onEngine('PGlite', () => ({ query, listen }));
});

const keepAlive = setInterval(() => {}, 1000);
after(() => clearInterval(keepAlive));
