// Durable Objects as a lock store: `LockDurableObject` keeps lock records in its SQLite storage,
// and `DurableObjectStore` routes each lock name to its own object (`idFromName`), so locks
// spread across objects and scale out. Each RPC method is one synchronous SQL statement inside
// the object — nothing awaits between its read and its write — so each is atomic. `changed`
// waits in the object's memory for its next write of a key, which answers it.
//
// In wrangler.toml:
//   [[durable_objects.bindings]]
//   name = "LOCKS"
//   class_name = "LockDurableObject"
//   [[migrations]]
//   tag = "v1"
//   new_sqlite_classes = ["LockDurableObject"]
// and in the worker: `export { LockDurableObject } from 'keyturn';`
import { DurableObject } from 'cloudflare:workers';

import { Watchers } from './watchers.js';

const newVersion = () => {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
};

/** @typedef {import('cloudflare:workers').DurableObjectState} DurableObjectState */

/** Holds the lock records routed to it, in SQLite storage. */
export class LockDurableObject extends DurableObject {
  /** @type {DurableObjectState['storage']['sql']} */
  #sql;
  /** each key's `changed` calls waiting, in this object's memory */
  #watchers = new Watchers();
  /**
   * @param {DurableObjectState} ctx
   * @param {unknown} env
   */
  constructor(ctx, env) {
    super(ctx, env);
    this.#sql = ctx.storage.sql;
    this.#sql.exec('CREATE TABLE IF NOT EXISTS keyturn_locks (key TEXT PRIMARY KEY, value TEXT NOT NULL, version TEXT NOT NULL)');
  }

  /**
   * @param {string} key
   * @param {string} value
   */
  create(key, value) {
    const version = newVersion();
    const rows = this.#sql.exec('INSERT INTO keyturn_locks (key, value, version) VALUES (?, ?, ?) ON CONFLICT (key) DO NOTHING RETURNING version', key, value, version).toArray();
    if (rows.length !== 1) return null;
    this.#watchers.tell(key);
    return version;
  }

  /** @param {string} key */
  read(key) {
    const rows = this.#sql.exec('SELECT value, version FROM keyturn_locks WHERE key = ?', key).toArray();
    return rows.length === 1 ? { value: rows[0].value, version: rows[0].version } : null;
  }

  /**
   * @param {string} key
   * @param {string} version
   * @param {string} value
   */
  replace(key, version, value) {
    const next = newVersion();
    const rows = this.#sql.exec('UPDATE keyturn_locks SET value = ?, version = ? WHERE key = ? AND version = ? RETURNING version', value, next, key, version).toArray();
    if (rows.length !== 1) return null;
    this.#watchers.tell(key);
    return next;
  }

  /**
   * True once `key`'s record no longer has `version` (null: once it exists): at once if it
   * already has not, else at this object's next write of it; false after `ms`.
   * @param {string} key
   * @param {string | null} version
   * @param {number} ms
   * @returns {boolean | Promise<boolean>}
   */
  changed(key, version, ms) {
    if ((this.read(key)?.version ?? null) !== version) return true;
    return this.#watchers.next(key, Math.max(0, Number(ms) || 0));
  }
}
