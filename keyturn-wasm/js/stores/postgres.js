// PostgreSQL as a LockStore, over any client: `new PostgresStore(query)` where
// `query(text, params)` runs one statement with `$1…` parameters and resolves to its rows, an
// array of objects. Each method is one statement, so each is atomic on the server: the create
// is `INSERT … ON CONFLICT DO NOTHING RETURNING`, the CAS an `UPDATE … WHERE key = $1 AND
// version = $2 RETURNING`. Static JS, copied into pkg/ by the build.
//
//   pg, Supabase:          new PostgresStore((text, params) => pool.query(text, params).then((r) => r.rows))
//   postgres.js:           new PostgresStore((text, params) => sql.unsafe(text, params))
//   Neon over HTTP:        new PostgresStore((text, params) => sql.query(text, params))
//   Neon over WebSocket:   as pg, with its Pool
//   PGlite:                new PostgresStore((text, params) => db.query(text, params).then((r) => r.rows))
//
// The table is made by `await store.setup()`, once per database (idempotent): construction does
// no I/O, and a store over a database without the table fails each call with a LockStoreError
// that says so.
//
// Versions are made here: this store object's random 64-bit id and its count of writes, as
// RedisStore's. A counter kept in the row (`version + 1`) would start again at 1 when a record
// is deleted and written again — a holder of the old record's version 1 could then replace the
// new record (ABA). A version no writer ever repeats cannot come back.
//
// With `listen(channel, onNotify)` (LISTEN on a connection of its own) the store has `changed`.
// One channel per table, the key as payload. A waiter marks the row it waits on (`watched`, a
// time on the server's clock) in the statement that reads its version, and a replace notifies,
// in its own statement, only a row marked until later than now: a write pays for NOTIFY — which
// serializes committing transactions that notify — only while someone waits, as RedisStore
// publishes only to subscribers. A mark lasts its wait's bound (`ms`, itself bounded by the
// lock's `storeTimeoutMs`): a wait answered sooner leaves the row notifying until then — a
// notification nobody needs, harmless (a waiter told reads again), and cheaper than a write to
// take the mark back, which could not tell whether another isolate's wait still needs it.
import { LockStoreError } from '../errors.js';
import { OptionNames, wrongType } from '../arguments.js';
import { Versions } from './versions.js';

const OPTIONS = new OptionNames(['table', 'listen']);

/**
 * Runs one statement with its parameters: its rows (or a promise of them), each an object by
 * column name.
 * @typedef {(text: string, params: unknown[]) => unknown} QueryFn
 */

/**
 * LISTENs on `channel` (a connection of its own), calling `onNotify(payload)` for each
 * notification: resolves (or returns), once listening, a function that stops listening.
 * @typedef {(channel: string, onNotify: (payload?: string) => void) => unknown} ListenFn
 */

// A table name: an unquoted identifier in lower case, optionally schema-qualified, at most 63
// characters in all (PostgreSQL's NAMEDATALEN − 1), so that it is also a valid NOTIFY channel.
// Checked, then quoted: never interpolated as the user wrote it.
const TABLE_NAME = /^[a-z_][a-z0-9_]*(?:\.[a-z_][a-z0-9_]*)?$/;

/** @param {string} table */
const quoted = (table) =>
  table
    .split('.')
    .map((part) => `"${part}"`)
    .join('.');

/** What a CREATE TABLE IF NOT EXISTS that raced another can fail with (see `setup`). @type {Set<unknown>} */
const RACED = new Set(['23505', '42710', '42P07']);

// A wait on a record that does not exist yet reads again this often: creates do not notify (a
// new row carries no mark), and the lock never waits on an absent record (it creates it).
const ABSENT_POLL_MS = 25;

/** @param {unknown} value */
const describe = (value) => (value === null ? 'null' : Array.isArray(value) ? 'an array' : typeof value === 'string' ? JSON.stringify(value.slice(0, 40)) : typeof value);

/**
 * `error` from the client, as the store's failure.
 * @param {string} what
 * @param {unknown} error
 */
function failure(what, error) {
  if (error instanceof LockStoreError) return error;
  const message = error instanceof Error ? error.message : String(error);
  // 42P01: undefined_table.
  const missing = /** @type {{ code?: unknown }} */ (error)?.code === '42P01' ? ' (no table: `await store.setup()` creates it)' : '';
  return new LockStoreError(`keyturn: postgres ${what} failed: ${message}${missing}`, { cause: error });
}

/**
 * An answer that is not rows of the statement's columns.
 * @param {string} what
 * @param {string} says
 */
const malformed = (what, says) => {
  const cause = new TypeError(`keyturn: postgres answered ${what} with ${says}`);
  return new LockStoreError(cause.message, { cause });
};

/**
 * The rows of an answer: an array, of at most one row (every statement here is by primary key).
 * @param {unknown} rows
 * @param {string} what
 * @returns {Record<string, unknown> | undefined}
 */
function onlyRow(rows, what) {
  if (!Array.isArray(rows)) throw malformed(what, `${describe(rows)}, not an array of rows`);
  if (rows.length > 1) throw malformed(what, `${rows.length} rows, not one or none`);
  const row = rows[0];
  if (row === undefined) return undefined;
  if (row === null || typeof row !== 'object') throw malformed(what, `a row that is ${describe(row)}, not an object`);
  return row;
}

/**
 * A column of `row` that must be a string.
 * @param {Record<string, unknown>} row
 * @param {string} column
 * @param {string} what
 */
function text(row, column, what) {
  const value = row[column];
  if (typeof value !== 'string') throw malformed(what, `a row whose ${column} is ${describe(value)}, not a string`);
  return value;
}

/** A lock store over PostgreSQL; records are rows of `table` (default `keyturn_locks`). */
export class PostgresStore {
  /** @type {QueryFn} */
  #query;
  /** @type {string} */
  #table;
  #versions = new Versions();
  /** @type {{ create: string, read: string, replace: string, mark: string, setup: string }} */
  #sql;
  /** Each key's waiters, told by a notification with the key as payload. @type {Map<string, Set<() => void>>} */
  #waiters = new Map();
  /** Waits in progress: the channel is listened to while there is one. */
  #waits = 0;
  /** Resolves to the function that stops listening, while listening. @type {Promise<unknown> | undefined} */
  #listening;
  /** Settles once the last listening has stopped. @type {Promise<unknown>} */
  #stopped = Promise.resolve();

  /**
   * @param {QueryFn} query
   * @param {{ table?: string, listen?: ListenFn }} [options]
   */
  constructor(query, options) {
    if (typeof query !== 'function') throw wrongType('query', 'a function (text, params) => rows', query);
    OPTIONS.check(options, 'options');
    const table = options?.table ?? 'keyturn_locks';
    if (typeof table !== 'string') throw wrongType('options.table', 'a string or undefined', table);
    if (!TABLE_NAME.test(table) || table.length > 63) {
      throw new RangeError(`keyturn: options.table must be a table name in lower case — letters, digits and _, optionally schema.table, at most 63 characters — not ${JSON.stringify(table)}`);
    }
    const listen = options?.listen;
    if (listen !== undefined && typeof listen !== 'function') {
      throw wrongType('options.listen', 'a function (channel, onNotify) => stop, or undefined', listen);
    }
    this.#query = query;
    this.#table = table;
    const t = quoted(table);
    this.#sql = {
      setup: `CREATE TABLE IF NOT EXISTS ${t} (key text PRIMARY KEY, value text NOT NULL, version text NOT NULL, watched timestamptz)`,
      create: `INSERT INTO ${t} (key, value, version) VALUES ($1, $2, $3) ON CONFLICT (key) DO NOTHING RETURNING version`,
      read: `SELECT value, version FROM ${t} WHERE key = $1`,
      // Every store's replace notifies a marked row, with `listen` or without: a waiter in
      // another isolate is woken whoever writes.
      replace: `UPDATE ${t} SET value = $3, version = $4 WHERE key = $1 AND version = $2 RETURNING version, CASE WHEN watched > now() THEN pg_notify($5, $1) END AS told`,
      mark: `UPDATE ${t} SET watched = greatest(watched, now() + $2::float8 * interval '1 millisecond') WHERE key = $1 RETURNING version`,
    };
    // With `listen`: true once `key`'s record no longer has `version` (null: once it exists),
    // false after `ms`. Without, no such property at all, and a lock over this store polls.
    if (listen !== undefined) {
      /** @type {(key: string, version: string | null, ms: number) => Promise<boolean>} */
      this.changed = (key, version, ms) => this.#changed(listen, key, version, ms);
    }
  }

  /**
   * Creates the table if it does not exist; safe to call again, and from several processes at
   * once. Resolves once the table is usable.
   * @returns {Promise<void>}
   */
  async setup() {
    try {
      await this.#query(this.#sql.setup, []);
    } catch (error) {
      // Two CREATE TABLE IF NOT EXISTS racing: the loser can fail on the catalog's unique index
      // (23505) or on the table's row type (42710, "type … already exists"), or find the table
      // (42P07), instead of seeing it; the table exists then, as a second try sees.
      if (!RACED.has(/** @type {{ code?: unknown }} */ (error)?.code)) throw failure('setup', error);
      try {
        await this.#query(this.#sql.setup, []);
      } catch (again) {
        throw failure('setup', again);
      }
    }
  }

  // Each method answers a promise, never a throw: a client that throws is a rejection.

  /**
   * Runs `text` and hands its rows to `answer`: one promise reaction for both the answer and
   * the failure (what `answer` throws is already a LockStoreError).
   * @template T
   * @param {string} text
   * @param {unknown[]} params
   * @param {string} what
   * @param {(rows: unknown) => T} answer
   * @returns {Promise<T>}
   */
  #run(text, params, what, answer) {
    try {
      return Promise.resolve(this.#query(text, params)).then(answer, (error) => {
        throw failure(what, error);
      });
    } catch (error) {
      return Promise.reject(failure(what, error));
    }
  }

  /**
   * @param {string} key
   * @param {string} value
   * @returns {Promise<string | null>}
   */
  create(key, value) {
    const version = this.#versions.next();
    return this.#run(this.#sql.create, [key, value, version], 'create', (rows) => this.#written(rows, version, 'create'));
  }

  /**
   * @param {string} key
   * @returns {Promise<{ value: string, version: string } | null>}
   */
  read(key) {
    return this.#run(this.#sql.read, [key], 'read', (rows) => {
      const row = onlyRow(rows, 'read');
      return row === undefined ? null : { value: text(row, 'value', 'read'), version: text(row, 'version', 'read') };
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
    return this.#run(this.#sql.replace, [key, version, value, next, this.#table], 'replace', (rows) => this.#written(rows, next, 'replace'));
  }

  /**
   * A write's rows: none when it did not apply (null), else one carrying the version it wrote.
   * @param {unknown} rows
   * @param {string} version
   * @param {string} what
   */
  #written(rows, version, what) {
    const row = onlyRow(rows, what);
    if (row === undefined) return null;
    const wrote = text(row, 'version', what);
    if (wrote !== version) throw malformed(what, `version ${describe(wrote)}, not the one it was sent`);
    return version;
  }

  /**
   * Listens (if no wait does already), registers this wait for `key`'s notification, then
   * marks the row and reads its version in one statement — a write after that statement
   * notifies, and the notification finds this wait registered — then waits for it or `ms`.
   * @param {ListenFn} listen
   * @param {string} key
   * @param {string | null} version
   * @param {number} ms
   * @returns {Promise<boolean>}
   */
  async #changed(listen, key, version, ms) {
    if (typeof key !== 'string') throw wrongType('key', 'a string', key);
    const bound = Math.min(Math.max(0, Number(ms) || 0), 2 ** 31 - 1);
    const started = performance.now();
    /** @type {() => void} */
    let tell = () => {};
    /** @type {Promise<boolean>} */
    const told = new Promise((resolve) => {
      tell = () => resolve(true);
    });
    let waiting = this.#waiters.get(key);
    if (waiting === undefined) this.#waiters.set(key, (waiting = new Set()));
    waiting.add(tell);
    this.#waits += 1;
    /** @type {ReturnType<typeof setTimeout> | undefined} */
    let timer;
    try {
      await this.#listen(listen);
      const row = await this.#run(this.#sql.mark, [key, bound], 'changed', (rows) => onlyRow(rows, 'changed'));
      const now = row === undefined ? null : text(row, 'version', 'changed');
      if (now !== version) return true;
      /** @type {Promise<boolean>} */
      const timeout = new Promise((resolve) => {
        timer = setTimeout(() => resolve(false), Math.max(0, bound - (performance.now() - started)));
      });
      if (now !== null) return await Promise.race([told, timeout]);
      // No row to mark: read again now and then until it exists or the wait is over.
      let over = false;
      timeout.then(() => {
        over = true;
      });
      while (!over) {
        await Promise.race([told, timeout, new Promise((resolve) => setTimeout(resolve, ABSENT_POLL_MS))]);
        if (over) return false;
        if ((await this.read(key)) !== null) return true;
      }
      return false;
    } finally {
      clearTimeout(timer);
      waiting.delete(tell);
      if (waiting.size === 0 && this.#waiters.get(key) === waiting) this.#waiters.delete(key);
      this.#waits -= 1;
      if (this.#waits === 0) this.#unlisten();
    }
  }

  /**
   * Listening on the table's channel, started by the first wait (after any earlier listening
   * has stopped). A listen that fails fails the waits that asked for it; the next wait tries
   * again.
   * @param {ListenFn} listen
   */
  #listen(listen) {
    if (this.#listening === undefined) {
      const onNotify = (/** @type {unknown} */ payload) => this.#notified(payload);
      const listening = this.#stopped.then(() => listen(this.#table, onNotify));
      this.#listening = listening;
      listening.catch(() => {
        if (this.#listening === listening) this.#listening = undefined;
      });
    }
    return this.#listening.catch((error) => {
      throw failure('listen', error);
    });
  }

  /** The last wait ended: listening stops (a failure to stop is the client's to report). */
  #unlisten() {
    const listening = this.#listening;
    if (listening === undefined) return;
    this.#listening = undefined;
    this.#stopped = listening.then(
      (stop) => (typeof stop === 'function' ? stop() : undefined),
      () => undefined,
    ).catch(() => undefined);
  }

  /**
   * A notification on the table's channel: the waits for its key (its payload) are told; a
   * notification without a payload tells every wait (a spurious `true` is allowed).
   * @param {unknown} payload
   */
  #notified(payload) {
    if (typeof payload === 'string') {
      const waiting = this.#waiters.get(payload);
      if (waiting !== undefined) for (const tell of waiting) tell();
      return;
    }
    for (const waiting of this.#waiters.values()) for (const tell of waiting) tell();
  }
}
