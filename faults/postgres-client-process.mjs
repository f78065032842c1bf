// One client process of the fault harness over Postgres: its own keyturn instance over
// PostgresStore on a pg pool (through its own FaultProxy; woken by the store's `changed` through
// LISTEN on a connection of its own, through the same proxy), contending on a few names with
// `withLock` or with the serializer over a store, each turn a fenced increment of the name's
// counter (on a server of its own, through a proxy of its own). It prints its history as JSON
// lines (see checker.mjs), the first saying it is ready, until SIGTERM. `keyturn` in the config
// is the package to load, when not the repository's (a planted bug's build).
//
//   node faults/postgres-client-process.mjs '<config JSON>'
import pg from 'pg';

import { clientStore, makeSerializer, makeTurn, runCallers } from './turn.mjs';

const config = JSON.parse(process.argv[2]);
const { id, port, countersPort, names, skewMs } = config;
const { PostgresStore, SERIALIZE_PREFIX, createKeyedSerializer, withLock } = await import(config.keyturn ?? 'keyturn');

// CLOCK_MONOTONIC: one clock for every process on the machine (performance.timeOrigin is each
// process's own estimate, and differs between processes by a fraction of a millisecond).
const real = () => Number(process.hrtime.bigint()) / 1e6;
const now = () => Date.now() + skewMs;
const emit = (event) => process.stdout.write(`${JSON.stringify(event)}\n`);

process.on('unhandledRejection', (reason) => emit({ kind: 'crash', client: id, detail: `unhandled rejection: ${reason?.stack ?? reason}` }));

// A connection the nemesis cuts, or a server killed or paused, must fail the call, not hang it
// (keyturn bounds the call by storeTimeoutMs; these free the pool's connection behind it): a
// query unanswered for 1 s fails and its connection is dropped from the pool, as is a connect
// (or a wait for a free connection) that takes longer. The pool opens new connections as
// needed, so it reconnects once the server is back.
const connection = (to) => ({ host: '127.0.0.1', port: to, user: 'postgres', database: 'postgres', query_timeout: 1000, connectionTimeoutMillis: 1000 });
const pool = (to) => {
  const made = new pg.Pool({ ...connection(to), max: 8 });
  made.on('error', () => {}); // an idle connection the nemesis dropped: the pool removes it
  return made;
};
const locks = pool(port);
const counters = pool(countersPort);

/**
 * LISTEN on a connection of its own, opened again whenever it drops (after a pause of 20 ms).
 * A notification missed while it was down is made up for by one without a payload to every
 * listener once it is back (PostgresStore then wakes every wait: a spurious wake-up, which
 * `changed` allows — the lock reads the record again).
 */
function listener() {
  const channels = new Map(); // channel → { callbacks: Set, listening: Promise }
  let client;
  let connecting;
  const connect = () => {
    connecting ??= (async () => {
      for (;;) {
        const next = new pg.Client(connection(port));
        next.on('error', () => {});
        try {
          await next.connect();
          for (const channel of channels.keys()) await next.query(`LISTEN ${next.escapeIdentifier(channel)}`);
        } catch {
          await next.end().catch(() => {});
          await new Promise((resolve) => setTimeout(resolve, 20));
          continue;
        }
        next.on('notification', ({ channel, payload }) => {
          for (const callback of channels.get(channel)?.callbacks ?? []) callback(payload);
        });
        next.once('end', () => {
          client = undefined;
          connecting = undefined;
          setTimeout(() => connect().then(() => {
            for (const { callbacks } of channels.values()) for (const callback of callbacks) callback();
          }), 20);
        });
        client = next;
        return next;
      }
    })();
    return connecting;
  };
  connect();
  return async (channel, onNotify) => {
    let entry = channels.get(channel);
    if (entry === undefined) {
      entry = { callbacks: new Set() };
      channels.set(channel, entry);
      const on = client ?? (await connect());
      entry.listening = on.query(`LISTEN ${on.escapeIdentifier(channel)}`);
    }
    entry.callbacks.add(onNotify);
    try {
      await entry.listening;
    } catch (error) {
      entry.callbacks.delete(onNotify);
      if (entry.callbacks.size === 0 && channels.get(channel) === entry) channels.delete(channel);
      throw error;
    }
    return () => {
      entry.callbacks.delete(onNotify);
      if (entry.callbacks.size > 0 || channels.get(channel) !== entry) return;
      channels.delete(channel);
      client?.query(`UNLISTEN ${client.escapeIdentifier(channel)}`).catch(() => {});
    };
  };
}

const listen = listener();
emit({ kind: 'ready', client: id, pids: [] });
const postgresStore = new PostgresStore((text, params) => locks.query(text, params).then((r) => r.rows), { listen });
const store = clientStore(postgresStore, config, { emit, real, serializePrefix: SERIALIZE_PREFIX });
const api = { withLock, createKeyedSerializer };

/** The fenced increment of a counter: 'ok', 'refused', or 'info' when its answer was lost. */
async function write(resource, fence, token) {
  try {
    const [{ ok }] = (await counters.query('SELECT fenced_increment($1, $2, $3) AS ok', [resource, String(fence), token])).rows;
    return ok ? 'ok' : 'refused';
  } catch {
    return 'info'; // it may or may not have applied
  }
}

const turn = makeTurn({ api, store, serialize: makeSerializer(api, store, config), write, real, now, emit, config });

await runCallers(turn, names, { id, emit, inFlight: config.inFlight, paced: config.paced });
process.exit(0);
