// SQLite as a LockStore, over any driver: `new SqliteStore(query)` where `query(sql, params)`
// runs one statement with `params` bound to its `?`s and answers its rows (or a promise of
// them). One dialect (SQLite 3.35 or later, for RETURNING) serves D1, the Durable Object SQL
// API, libSQL/Turso, node:sqlite, better-sqlite3 and bun:sqlite:
//
//   D1:              (sql, params) => env.DB.prepare(sql).bind(...params).all().then((r) => r.results)
//   Durable Objects: (sql, params) => ctx.storage.sql.exec(sql, ...params).toArray()
//   libSQL / Turso:  (sql, args) => client.execute({ sql, args }).then((r) => r.rows)
//   better-sqlite3:  (sql, params) => { const s = db.prepare(sql); return s.reader ? s.all(...params) : s.run(...params); }
//                    (its `all` refuses setup's CREATE TABLE; the README's also prepares each once)
//   node:sqlite:     (sql, params) => db.prepare(sql).all(...params)
//   bun:sqlite:      (sql, params) => db.query(sql).all(...params)
//
// Each method is one statement, so each is atomic in the database: create is an INSERT that
// does nothing on an existing key, replace an UPDATE on the key and the version it was given,
// both RETURNING the version they wrote (no row: not written). A row is an object by column
// name, or an array of the columns in the statement's order (D1's `raw()`, bun's `values()`):
// the store reads either, so no snippet has to convert. Every column is TEXT — the version
// too, chosen by the writer as RedisStore's are — so a driver that answers integers as bigints
// has none to answer, and no version repeats even when a row is deleted and created again (a
// taker that watched a version stay put must never see a new holder's record as that one).
//
// No `changed`: SQLite cannot tell anyone of a write, so a lock over this store polls.
import { OptionNames, describe, wrongType } from '../arguments.js';
import { LockStoreError } from '../errors.js';
import { Versions } from './versions.js';

const OPTIONS = new OptionNames(['table']);

/**
 * Runs one statement, its `?`s bound to `params` in order: its rows, each an object by column
 * name or an array of columns, or a promise of them.
 * @typedef {(sql: string, params: string[]) => unknown} SqliteQuery
 */

// An identifier that needs no quoting in any SQLite, never one SQLite (`sqlite_`) or
// Cloudflare (`_cf_`) reserves. It is quoted anyway, so a keyword is a table name too.
const TABLE = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;
const RESERVED = /^(sqlite_|_cf_)/i;

/**
 * A column of `row`, by name or, for a row answered as an array, by its place in the statement.
 * @param {unknown} row
 * @param {string} name
 * @param {number} index
 */
const column = (row, name, index) =>
  Array.isArray(row) ? row[index] : row !== null && typeof row === 'object' ? /** @type {Record<string, unknown>} */ (row)[name] : undefined;

/** What an answer was, for a message: a driver's result object is named by its keys. */
function shape(/** @type {unknown} */ answer) {
  if (Array.isArray(answer)) return `${answer.length} row${answer.length === 1 ? '' : 's'}`;
  if (answer !== null && typeof answer === 'object') return `an object with ${Object.keys(answer).slice(0, 4).join(', ') || 'no keys'}`;
  return describe(answer);
}

/**
 * @param {string} what
 * @param {unknown} answer
 * @param {string} expected
 */
function malformed(what, answer, expected) {
  // A result object where rows were wanted is the commonest slip: say where the rows are.
  const hint = answer !== null && typeof answer === 'object' && !Array.isArray(answer) ? ' (answer the rows: D1\'s `results`, libSQL\'s `rows`)' : '';
  return new LockStoreError(`keyturn: SqliteStore.${what}: the query answered ${shape(answer)}, not ${expected}${hint}`);
}

/**
 * @param {string} what
 * @param {unknown} cause
 */
function failed(what, cause) {
  if (cause instanceof LockStoreError) return cause;
  const message = cause instanceof Error ? cause.message : String(cause);
  return new LockStoreError(`keyturn: SqliteStore.${what}: ${message}`, { cause });
}

/** A lock store over SQLite; lock records are rows of `table` (default `keyturn_locks`). */
export class SqliteStore {
  /** @type {SqliteQuery} */
  #query;
  #create;
  #read;
  #replace;
  #setup;
  #versions = new Versions();
  /**
   * Does no I/O: the table is made by `setup()`.
   * @param {SqliteQuery} query
   * @param {{ table?: string }} [options]
   */
  constructor(query, options) {
    if (typeof query !== 'function') throw wrongType('query', 'a function (sql, params) => rows', query);
    OPTIONS.check(options, 'options');
    const table = options?.table ?? 'keyturn_locks';
    if (typeof table !== 'string') throw wrongType('options.table', 'a string or undefined', table);
    if (!TABLE.test(table) || RESERVED.test(table)) {
      throw new RangeError(
        `keyturn: options.table must be a plain SQL name (letters, digits and _, not first a digit, at most 63, not sqlite_… or _cf_…), not ${JSON.stringify(table)}`,
      );
    }
    this.#query = query;
    const t = `"${table}"`;
    this.#setup = `CREATE TABLE IF NOT EXISTS ${t} ("key" TEXT PRIMARY KEY NOT NULL, "value" TEXT NOT NULL, "version" TEXT NOT NULL) WITHOUT ROWID`;
    this.#create = `INSERT INTO ${t} ("key", "value", "version") VALUES (?, ?, ?) ON CONFLICT ("key") DO NOTHING RETURNING "version"`;
    this.#read = `SELECT "value", "version" FROM ${t} WHERE "key" = ?`;
    this.#replace = `UPDATE ${t} SET "value" = ?, "version" = ? WHERE "key" = ? AND "version" = ? RETURNING "version"`;
  }

  /**
   * Creates the table if it does not exist: idempotent, and needed once per database before
   * the first lock. Rejects with `LockStoreError` when the statement fails.
   * @returns {Promise<void>}
   */
  setup() {
    return this.#run(this.#setup, [], 'setup', () => undefined);
  }

  // Each method answers a promise, never a throw: a driver that throws is a rejection.

  /**
   * @param {string} key
   * @param {string} value
   * @returns {Promise<string | null>}
   */
  create(key, value) {
    const version = this.#versions.next();
    return this.#run(this.#create, [key, value, version], 'create', (rows) => this.#written(rows, version, 'create'));
  }

  /**
   * @param {string} key
   * @returns {Promise<{ value: string, version: string } | null>}
   */
  read(key) {
    return this.#run(this.#read, [key], 'read', (rows) => {
      if (!Array.isArray(rows) || rows.length > 1) throw malformed('read', rows, 'no row or one');
      if (rows.length === 0) return null;
      const value = column(rows[0], 'value', 0);
      const version = column(rows[0], 'version', 1);
      if (typeof value !== 'string' || typeof version !== 'string') throw malformed('read', rows, 'a row of a text value and version');
      return { value, version };
    });
  }

  /**
   * @param {string} key
   * @param {string} version
   * @param {string} value
   * @returns {Promise<string | null>}
   */
  replace(key, version, value) {
    const next = this.#versions.next();
    return this.#run(this.#replace, [value, next, key, version], 'replace', (rows) => this.#written(rows, next, 'replace'));
  }

  /**
   * A write's rows: none when it did not write, else one with the version it was given.
   * @param {unknown} rows
   * @param {string} version
   * @param {string} what
   */
  #written(rows, version, what) {
    if (!Array.isArray(rows) || rows.length > 1) throw malformed(what, rows, 'no row or one');
    if (rows.length === 0) return null;
    if (column(rows[0], 'version', 0) !== version) throw malformed(what, rows, 'the version it wrote');
    return version;
  }

  /**
   * Runs `sql` and reads its answer with `answer`; every failure, a synchronous throw too, is a
   * rejection with `LockStoreError`. A synchronous driver's rows (better-sqlite3, Durable
   * Objects) are read at once: one promise for the call, not a chain.
   * @template T
   * @param {string} sql
   * @param {string[]} params
   * @param {string} what
   * @param {(rows: unknown) => T} answer
   * @returns {Promise<T>}
   */
  #run(sql, params, what, answer) {
    try {
      const rows = this.#query(sql, params);
      if (rows !== null && typeof rows === 'object' && typeof (/** @type {{ then?: unknown }} */ (rows)).then === 'function') {
        return Promise.resolve(rows).then(answer, (error) => {
          throw failed(what, error);
        });
      }
      return Promise.resolve(answer(rows));
    } catch (error) {
      return Promise.reject(failed(what, error));
    }
  }
}
