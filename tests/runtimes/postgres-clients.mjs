// node-postgres (pg) as the README shows it for PostgresStore: a pool for the store's
// statements, and with `listen` a client of its own that LISTENs. Used by the Postgres tests
// (tests/js/postgres-*.test.mjs), their other process (postgres-keyturn-process.mjs) and
// bench/stores-postgres.mjs.
import pg from 'pg';

/**
 * The server's connection settings, from what tests/runtimes/postgres-server.mjs answers.
 * @param {{ host: string, port: number }} server
 */
export const connection = ({ host, port }) => ({ host, port, user: 'postgres', database: 'postgres' });

/**
 * A pool and its `query` for PostgresStore; `end()` closes what was opened.
 * @param {{ host: string, port: number }} server
 * @param {{ max?: number }} [options]
 */
export function pgPool(server, { max = 10 } = {}) {
  const pool = new pg.Pool({ ...connection(server), max });
  pool.on('error', () => {}); // an idle connection the server dropped: the next query reconnects
  return { pool, query: (text, params) => pool.query(text, params).then((result) => result.rows), end: () => pool.end() };
}

/**
 * A client of its own that LISTENs, and `listen(channel, onNotify)` for PostgresStore over it:
 * resolves once listening to the function that stops.
 * @param {{ host: string, port: number }} server
 */
export async function pgListener(server) {
  const client = new pg.Client(connection(server));
  client.on('error', () => {});
  await client.connect();
  /** @type {Map<string, (payload?: string) => void>} */
  const onNotify = new Map();
  client.on('notification', ({ channel, payload }) => onNotify.get(channel)?.(payload));
  return {
    client,
    listen: async (channel, on) => {
      onNotify.set(channel, on);
      await client.query(`LISTEN "${channel}"`);
      return () => {
        onNotify.delete(channel);
        return client.query(`UNLISTEN "${channel}"`);
      };
    },
    end: () => client.end(),
  };
}
