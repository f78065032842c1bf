// Bench worker for bench/stores-sqlite.mjs: SqliteStore over D1 inside workerd, beside its two
// statements issued directly (bench/runtimes/sqlite-cycles.mjs). GET /?rounds=N answers the figures.
import { acquireLock, lockStats, SqliteStore } from '../../pkg/workerd.js';
import { cycles } from './sqlite-cycles.mjs';

export default {
  async fetch(request, env) {
    const rounds = Number(new URL(request.url).searchParams.get('rounds'));
    const query = (sql, params) => env.DB.prepare(sql).bind(...params).all().then((result) => result.results);
    return Response.json(await cycles(query, { SqliteStore, acquireLock, lockStats }, rounds));
  },
};
