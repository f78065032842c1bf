// The README's options tables against the package, both ways, so neither can drift: every option
// an export accepts has its row and every row is an option it accepts — read from the package's
// one list per export (its `OptionNames`) and its types, and confirmed by calling the export with each name and
// with one nobody knows. Defaults are held to the constants the package exposes, and to the
// stores' own `options.x ?? default`; each numeric range's ends are tried: the ends accepted,
// one past them refused with a RangeError.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';

import * as keyturn from 'keyturn';
import { MAX_CONCURRENCY, MAX_KEY_BYTES, MAX_RATE_LIMIT, MAX_TIMEOUT_MS } from '../../pkg/constants.js';

const { acquireLock, createKeyedSerializer, withLock, MemoryStore, DEFAULT_TIMEOUT_MS, LOCK_STALE_MS, LOCK_WAIT_MS } = keyturn;
const root = new URL('../../', import.meta.url);
const readme = readFileSync(new URL('README.md', root), 'utf8');
const source = (file) => readFileSync(new URL(`keyturn-wasm/js/${file}`, root), 'utf8');

/** The names of a list in the package's source: `const NAME = [...]` or `NAME = new OptionNames([...]`. */
function namesIn(file, name) {
  const list = source(file).match(new RegExp(`${name} = (?:new OptionNames\\()?\\[([^\\]]*)\\]`))?.[1];
  assert.ok(list, `${name} in ${file}`);
  return [...list.matchAll(/'(\w+)'/g)].map(([, option]) => option).sort();
}

/** The README's table that follows the line beginning with `intro`: its rows as objects by header. */
function table(intro) {
  const lines = readme.split('\n');
  const at = lines.findIndex((line) => line.startsWith(intro));
  assert.ok(at >= 0, `a table after "${intro}"`);
  const start = lines.findIndex((line, i) => i > at && line.startsWith('|'));
  const rows = [];
  for (let i = start; lines[i]?.startsWith('|'); i++) rows.push(lines[i].slice(1, -1).split('|').map((cell) => cell.trim()));
  const [header, , ...body] = rows;
  return body.map((cells) => Object.fromEntries(header.map((column, i) => [column, cells[i].replace(/^`(.*)`$/, '$1')])));
}

const sorted = (names) => [...new Set(names)].sort();
const refusedAsUnknown = (error) => error instanceof TypeError && / has no option /.test(error.message);

/** Whether `call(options)` refuses `options` as having an unknown name (sync throw or rejection). */
async function unknownTo(call, options) {
  try {
    await call(options);
    return false;
  } catch (error) {
    return refusedAsUnknown(error);
  }
}

const UNKNOWN = 'surelyNotAnOption';
const serializerRows = table('`createKeyedSerializer(options)`');
const callRows = table('`serialize(key, work, options)`');
const lockRows = table('`acquireLock(store, name, options)`');
const storeRows = table('Stores (');

// The package's option lists, one per export.
const SERIALIZER = namesIn('serializer.js', 'SERIALIZER_NAMES');
const CALL = namesIn('serializer.js', 'CALL_OPTIONS');
const LOCK = namesIn('lock.js', 'LOCK_OPTIONS');
const RATE = namesIn('arguments.js', 'RATE_FIELDS');
// Each store's module, by the class the README names; MemoryStore takes no options.
const STORES = {
  DurableObjectStore: 'stores/durable-object-store.js',
  R2Store: 'stores/r2.js',
  DenoKvStore: 'stores/deno-kv.js',
  RedisStore: 'stores/redis.js',
  SqliteStore: 'stores/sqlite.js',
  PostgresStore: 'stores/postgres.js',
  DynamoDbStore: 'stores/dynamodb.js',
};

test('the serializer\'s table has a row for each of its options and of rate\'s, and no other', () => {
  const documented = serializerRows.map((row) => row.option);
  assert.deepEqual(sorted(documented.map((name) => name.split('.')[0])), SERIALIZER);
  assert.deepEqual(sorted(documented.filter((name) => name.startsWith('rate.')).map((name) => name.slice(5))), RATE);
});

test('the call\'s, the lock\'s and each store\'s tables have a row for each option, and no other', () => {
  assert.deepEqual(sorted(callRows.map((row) => row.option)), CALL);
  assert.deepEqual(sorted(lockRows.map((row) => row.option)), LOCK);
  const stores = new Map();
  for (const row of storeRows) {
    const name = row.store.match(/^\w+/)[0];
    if (!stores.has(name)) stores.set(name, []);
    if (row.option) stores.get(name).push(row.option);
  }
  assert.deepEqual(sorted([...stores.keys()]), sorted(['MemoryStore', ...Object.keys(STORES)]), 'a row for every store the package exports');
  assert.deepEqual(stores.get('MemoryStore'), []);
  for (const [name, file] of Object.entries(STORES)) assert.deepEqual(sorted(stores.get(name)), namesIn(file, 'OPTIONS'), name);
  for (const name of stores.keys()) assert.equal(typeof keyturn[name], 'function', `${name} is exported`);
});

test('the types (index.d.ts) declare the same options as the tables', () => {
  const types = source('index.d.ts');
  const fields = (name) => {
    const body = types.match(new RegExp(`export interface ${name} \\{([\\s\\S]*?)\\n\\}`))?.[1];
    assert.ok(body, name);
    return sorted([...body.matchAll(/^  (\w+)\?:/gm)].map(([, field]) => field));
  };
  assert.deepEqual(fields('KeyedSerializerOptions'), sorted(serializerRows.map((row) => row.option.split('.')[0])));
  assert.deepEqual(fields('SerializeOptions'), sorted(callRows.map((row) => row.option)));
  assert.deepEqual(fields('LockOptions'), sorted(lockRows.map((row) => row.option)));
});

test('each documented option is accepted by its export, and a name nobody knows is refused', async () => {
  const store = new MemoryStore();
  const serialize = createKeyedSerializer();
  const bucket = { get: async () => null, put: async () => null, head: async () => null };
  const namespace = { idFromName: () => ({}), get: () => ({}) };
  const kv = { get: async () => ({ value: null, versionstamp: null }), atomic: () => ({}) };
  const dynamo = { putItem: async () => ({}), getItem: async () => ({}) };
  const query = async () => [];
  const makers = {
    DurableObjectStore: (options) => new keyturn.DurableObjectStore(namespace, options),
    R2Store: (options) => new keyturn.R2Store(bucket, options),
    DenoKvStore: (options) => new keyturn.DenoKvStore(kv, options),
    RedisStore: (options) => new keyturn.RedisStore(query, options),
    SqliteStore: (options) => new keyturn.SqliteStore(query, options),
    PostgresStore: (options) => new keyturn.PostgresStore(query, options),
    DynamoDbStore: (options) => new keyturn.DynamoDbStore(dynamo, { table: 'keyturn-locks', ...options }),
  };
  const exports = [
    ['createKeyedSerializer', (options) => createKeyedSerializer(options), serializerRows.map((row) => row.option).filter((name) => !name.includes('.'))],
    ['createKeyedSerializer with a store', (options) => createKeyedSerializer({ store, ...options }), ['staleMs', 'maxClockSkewMs', 'storeTimeoutMs']],
    ['serialize', (options) => serialize('k', () => 1, options), callRows.map((row) => row.option)],
    ['acquireLock', (options) => acquireLock(store, 'n', options).then((lock) => lock?.release()), lockRows.map((row) => row.option)],
    ['withLock', (options) => withLock(store, 'n', () => 1, options), lockRows.map((row) => row.option)],
    ['rate', (options) => createKeyedSerializer({ rate: options }), serializerRows.map((row) => row.option).filter((name) => name.startsWith('rate.')).map((name) => name.slice(5))],
    ...Object.entries(makers).map(([name, make]) => [name, make, storeRows.filter((row) => row.store.startsWith(name) && row.option).map((row) => row.option)]),
  ];
  for (const [what, call, names] of exports) {
    // undefined is every optional option's "the default": only the name is on trial.
    for (const name of names) assert.equal(await unknownTo(call, { [name]: undefined }), false, `${what} accepts ${name}`);
    assert.equal(await unknownTo(call, { [UNKNOWN]: undefined }), true, `${what} refuses ${UNKNOWN}`);
  }
  assert.equal(serialize.pending(), 0);
  assert.equal(MemoryStore.length, 0, 'MemoryStore takes no options, as its row says');
});

test('the defaults are the package\'s: its constants, and each store\'s own', () => {
  const row = (rows, option) => rows.find((r) => r.option === option);
  assert.equal(Number(row(serializerRows, 'timeoutMs').default), DEFAULT_TIMEOUT_MS);
  assert.equal(Number(row(serializerRows, 'staleMs').default), LOCK_STALE_MS);
  assert.equal(Number(row(lockRows, 'waitMs').default), LOCK_WAIT_MS);
  assert.equal(Number(row(lockRows, 'staleMs').default), LOCK_STALE_MS);
  assert.equal(row(callRows, 'timeoutMs').default, 'the serializer\'s');
  for (const rows of [serializerRows, lockRows]) {
    assert.equal(row(rows, 'concurrency').default, '1');
    assert.equal(row(rows, 'maxClockSkewMs').default, '0');
    assert.equal(row(rows, 'storeTimeoutMs').default, 'staleMs');
  }
  // A store's default is what its constructor puts after `options.x ??`.
  for (const { store, option, default: given } of storeRows.filter((r) => r.option)) {
    const file = STORES[store.match(/^\w+/)[0]];
    const found = source(file).match(new RegExp(`options\\??\\.${option} \\?\\? ([^,;)]+[\\])]?)`))?.[1];
    if (found === undefined) assert.match(given, /^(none|required)$/, `${store} ${option}: no default in ${file}, so none`);
    else assert.equal(given, found.replace(/^'(.*)'$/, '$1'), `${store} ${option}`);
  }
});

test('each range\'s ends: accepted at the ends, a RangeError one past them', async () => {
  const ends = { '2³¹−1': MAX_TIMEOUT_MS, 1024: MAX_CONCURRENCY, 1000: MAX_RATE_LIMIT };
  assert.ok(readme.includes(`2³¹−1 = ${MAX_TIMEOUT_MS.toLocaleString('en').replaceAll(',', ' ')}`), 'the durations\' limit, spelled out');
  assert.ok(readme.includes(`at most ${MAX_KEY_BYTES} bytes of UTF-8`), 'the key limit');
  assert.ok(callRows && readme.includes(`a non-empty string of at most ${MAX_KEY_BYTES} bytes of UTF-8`));
  const store = new MemoryStore();
  const serializer = (option, value) => {
    if (option.startsWith('rate.')) return createKeyedSerializer({ rate: { limit: 1, periodMs: 1, [option.slice(5)]: value } });
    return createKeyedSerializer({ store: /^(staleMs|maxClockSkewMs|storeTimeoutMs)$/.test(option) ? store : undefined, [option]: value });
  };
  const lock = (option, value) => acquireLock(store, `range:${option}:${value}`, { [option]: value, waitMs: option === 'waitMs' ? value : 0 }).then((held) => held?.release());
  let tried = 0;
  for (const [rows, call] of [[serializerRows, serializer], [lockRows, lock], [callRows, (option, value) => createKeyedSerializer()('k', () => 1, { [option]: value })]]) {
    for (const { option, range } of rows) {
      const [, low, high] = range.match(/^(?:whole, )?(\d+)–(\S+)$/) ?? [];
      if (low === undefined) continue;
      const [min, max] = [Number(low), ends[high] ?? Number(high)];
      assert.ok(Number.isFinite(max), `${option}: ${range}`);
      for (const value of [min, max]) await call(option, value);
      for (const value of [min - 1, max + 1]) {
        await assert.rejects(async () => call(option, value), RangeError, `${option}: ${value} is out of ${range}`);
      }
      tried++;
    }
  }
  assert.ok(tried >= 12, `${tried} ranges tried`);
});
