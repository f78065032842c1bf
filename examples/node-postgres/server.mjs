// A counter per id in Postgres, one turn at a time per id across every process of the app: POST
// /<id> adds one, GET /<id> reads it. The lease is a row of keyturn's table (PostgresStore, woken
// by LISTEN/NOTIFY); the count a row of `counters`, written only with a fence above the last.
import { createServer } from 'node:http';
import pg from 'pg';
import { createKeyedSerializer, PostgresStore } from 'keyturn';

const url = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const pool = new pg.Pool({ connectionString: url });
const listener = new pg.Client({ connectionString: url }); // LISTEN needs a connection of its own
await listener.connect();
const heard = new Map();
listener.on('notification', ({ channel, payload }) => heard.get(channel)?.(payload));
const store = new PostgresStore((text, params) => pool.query(text, params).then((result) => result.rows), {
  listen: async (channel, onNotify) => {
    heard.set(channel, onNotify);
    await listener.query(`LISTEN "${channel}"`);
    return () => {
      heard.delete(channel);
      return listener.query(`UNLISTEN "${channel}"`);
    };
  },
});
await store.setup(); // keyturn's table; safe to repeat
await pool.query('CREATE TABLE IF NOT EXISTS counters (id text PRIMARY KEY, count bigint NOT NULL, fence bigint NOT NULL)');

const serialize = createKeyedSerializer({ store, timeoutMs: 10_000 });

async function add(id) {
  return serialize(id, async (signal, turn) => {
    const { rows } = await pool.query('SELECT count FROM counters WHERE id = $1', [id]);
    const next = Number(rows[0]?.count ?? 0) + 1;
    if (signal.aborted) throw new Error('too late: the next turn re-decides');
    // The fence keeps a turn that outlived its lease from writing over a later one.
    const written = await pool.query(
      'INSERT INTO counters (id, count, fence) VALUES ($1, $2, $3) ON CONFLICT (id) DO UPDATE SET count = $2, fence = $3 WHERE counters.fence < $3',
      [id, next, turn.fence],
    );
    if (written.rowCount !== 1) throw new Error('a later turn wrote first');
    return next;
  });
}

const server = createServer(async (request, response) => {
  try {
    const id = decodeURIComponent(new URL(request.url, 'http://localhost').pathname.slice(1)) || 'default';
    const body =
      request.method === 'POST'
        ? { id, count: await add(id) }
        : { count: Number((await pool.query('SELECT count FROM counters WHERE id = $1', [id])).rows[0]?.count ?? 0) };
    response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
  } catch (error) {
    response.writeHead(503, { 'content-type': 'application/json' }).end(JSON.stringify({ error: String(error) }));
  }
});
server.listen(Number(process.env.PORT ?? 3000), '127.0.0.1', () => console.log(`listening on ${server.address().port}`));

process.once('SIGTERM', () => server.close(() => Promise.all([pool.end(), listener.end()])));
