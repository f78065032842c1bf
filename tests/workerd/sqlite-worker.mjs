// Run inside workerd (Miniflare) by tests/js/sqlite-workerd.test.mjs, as one worker or as two
// (two isolates) sharing the D1 database DB: SqliteStore over D1 and over a Durable Object's SQL
// storage (SqlLocks, a SQLite-backed class), with the package's workerd entry, as a Worker uses it.
//   GET  /contract?store=d1|do   the store contract (tests/runtimes/contract.mjs): its failures
//   POST {"op":"loops",…}        holders of `name` at `n` (tests/js/semaphore-loops.mjs), each turn
//                                sent, while it holds, to http://history/ (the test's own service)
//   POST {"op":"hold",…}         takes `name` and never lets it go: this holder is gone
//   POST {"op":"acquire",…}      takes `name` (waiting up to `waitMs`) and releases it: its fence
import { DurableObject } from 'cloudflare:workers';

import { acquireLock, withLock, SqliteStore } from '../../pkg/workerd.js';
import { contract } from '../runtimes/contract.mjs';
import { semaphoreLoops } from '../js/semaphore-loops.mjs';

/** The README's D1 query, as written there: D1 answers a result whose `results` are the rows. */
const d1 = (env) => (sql, params) => env.DB.prepare(sql).bind(...params).all().then((r) => r.results);

/** A Durable Object whose own SQL storage holds its locks: the contract runs inside it. */
export class SqlLocks extends DurableObject {
  async fetch() {
    // The README's Durable Object query, as written there: a cursor, its rows as objects.
    const { ctx } = this;
    const query = (sql, params) => ctx.storage.sql.exec(sql, ...params).toArray();
    await new SqliteStore(query).setup();
    return Response.json({ failures: await contract(() => new SqliteStore(query), acquireLock) });
  }
}

// This isolate's store over D1, made at the first request (a lock manager is kept per store).
let store;
const abandoned = [];

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    if (url.pathname === '/contract') {
      if (url.searchParams.get('store') === 'do') return env.SQL_LOCKS.get(env.SQL_LOCKS.idFromName('contract')).fetch(request);
      const query = d1(env);
      await new SqliteStore(query).setup();
      return Response.json({ failures: await contract(() => new SqliteStore(query), acquireLock) });
    }
    if (store === undefined) {
      store = new SqliteStore(d1(env));
      await store.setup();
    }
    const body = await request.json();
    if (body.op === 'loops') {
      const record = (event) => fetch('http://history/', { method: 'POST', body: JSON.stringify(event) }).then((response) => response.arrayBuffer());
      return Response.json({ taken: await semaphoreLoops(withLock, store, record, body) });
    }
    if (body.op === 'hold') {
      const lock = await acquireLock(store, body.name, { staleMs: body.staleMs });
      abandoned.push(lock); // never released, never renewed
      return Response.json({ fence: lock.fence, heldUntil: lock.heldUntil });
    }
    if (body.op === 'acquire') {
      const lock = await acquireLock(store, body.name, { waitMs: body.waitMs });
      if (lock === undefined) return Response.json({ fence: null });
      const answer = { fence: lock.fence, at: Date.now() };
      await lock.release();
      return Response.json(answer);
    }
    return new Response(`no op ${body.op}`, { status: 400 });
  },
};
