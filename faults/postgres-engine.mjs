// The fault harness's Postgres engine: a postgresql server of its own for the lock records
// (PostgresStore's table), another for the fenced counters (what the checker reads must outlive
// the store's faults), and in front of them two TCP proxies per client slot (faults/proxy.mjs).
// Its faults: the lock records' server killed (SIGKILL of every process) and started again on
// its directory, and paused (SIGSTOP) past the lease — neither loses a commit — a client's
// connections cut (stalled past the lease, then reset), and an answer lost after the server
// applied the write. Its store fault loses the last writes: a failover to a standby that missed
// them (a crash-consistent copy of the server's directory taken 200 ms before the server dies,
// started on its port — what an asynchronous replica lagging that much gives).
import { rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

import { PostgresStore } from 'keyturn';
import pg from 'pg';

import { FaultProxy } from './proxy.mjs';
import { copyCluster, initCluster, removeCluster, startPostgresServer } from './postgres-server.mjs';

const clientScript = fileURLToPath(new URL('./postgres-client-process.mjs', import.meta.url));

// The fenced counters: a write below the highest fence the resource accepted is refused, and
// each accepted one is logged in order. The row lock orders concurrent increments of a resource.
const COUNTERS_SCHEMA = `
CREATE TABLE counters (resource text PRIMARY KEY, fence bigint NOT NULL, value bigint NOT NULL);
CREATE TABLE accepted (seq bigserial PRIMARY KEY, resource text NOT NULL, fence bigint NOT NULL, token text NOT NULL);
CREATE FUNCTION fenced_increment(r text, f bigint, t text) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE highest bigint;
BEGIN
  INSERT INTO counters VALUES (r, -1, 0) ON CONFLICT DO NOTHING;
  SELECT fence INTO highest FROM counters WHERE resource = r FOR UPDATE;
  IF f < highest THEN RETURN false; END IF;
  UPDATE counters SET fence = f, value = value + 1 WHERE resource = r;
  INSERT INTO accepted (resource, fence, token) VALUES (r, f, t);
  RETURN true;
END $$;`;

/** One query on a connection of its own, straight to the server (not through a proxy). */
async function admin(port, text, params) {
  const client = new pg.Client({ host: '127.0.0.1', port, user: 'postgres', database: 'postgres' });
  client.on('error', () => {});
  await client.connect();
  try {
    return (await client.query(text, params)).rows;
  } finally {
    await client.end().catch(() => {});
  }
}

/**
 * `track(pid, command)` registers each postmaster started, for the harness to stop by its PID
 * (its backends go with it in `stop`). A store fault keeps the store away for more than
 * `maxClockSkewMs` after it lost data (the README's "What the lock promises").
 */
export async function startPostgresEngine({ lease, sleep, track }) {
  const cluster = initCluster();
  const countersCluster = copyCluster(cluster, cluster.data, 'counters');
  let [locks, counters] = await Promise.all([startPostgresServer({ data: cluster.data }), startPostgresServer({ data: countersCluster.data })]);
  for (const server of [locks, counters]) track(server.process.pid, 'postgres');
  await admin(counters.port, COUNTERS_SCHEMA);
  // The lock records' table, made once here, before any client runs (the store's documented call).
  const setupPool = new pg.Pool({ host: '127.0.0.1', port: locks.port, user: 'postgres', database: 'postgres', max: 1 });
  await new PostgresStore((text, params) => setupPool.query(text, params).then((r) => r.rows)).setup();
  await setupPool.end();

  const target = ({ port }) => ({ host: '127.0.0.1', port });
  const slots = []; // per client slot: its proxies to each server (a reborn client keeps them)
  const proxiesOf = (slot) => [slots[slot].locks, slots[slot].counters];
  const awayMs = lease.maxClockSkewMs + 20;
  let standbys = 0;
  /** The lock records' server killed, every process of it at once (a crashed machine). */
  const killLocks = async () => {
    locks.signal('SIGKILL');
    await locks.exited;
  };
  const restartLocks = async (data) => {
    locks = await startPostgresServer({ data, port: locks.port });
    track(locks.process.pid, 'postgres');
  };
  return {
    name: 'postgres',
    async client(slot) {
      if (slots[slot] === undefined) {
        slots[slot] = { locks: new FaultProxy(target(locks)), counters: new FaultProxy(target(counters)) };
        slots[slot].ports = { port: await slots[slot].locks.listen(), countersPort: await slots[slot].counters.listen() };
      }
      return { script: clientScript, config: slots[slot].ports };
    },
    faults: {
      async 'server killed (kill -9), restarted'() {
        await killLocks();
        await restartLocks(locks.data);
      },
      async 'server paused past the lease'() {
        locks.signal('SIGSTOP');
        await sleep(lease.staleMs * 1.5);
        locks.signal('SIGCONT');
      },
      async 'connections cut past the lease'(slot) {
        await Promise.all(proxiesOf(slot).map((proxy) => proxy.blackhole(lease.staleMs * 1.5)));
      },
      async 'answer lost after it applied'(slot) {
        for (const proxy of proxiesOf(slot)) proxy.loseAnswers(1);
        await sleep(lease.staleMs / 2);
      },
    },
    storeFaults: {
      async 'failover, last writes missed'() {
        // The standby: the server's directory as of now, copied while every process of the
        // server is stopped (so the copy is what a crash now would leave).
        locks.signal('SIGSTOP');
        let standby;
        try {
          standby = copyCluster(cluster, locks.data, `standby-${++standbys}`);
        } finally {
          locks.signal('SIGCONT');
        }
        await sleep(200); // the writes of these milliseconds reach the old primary only
        const old = locks.data;
        await killLocks();
        await sleep(awayMs);
        await restartLocks(standby.data);
        rmSync(old, { recursive: true, force: true }); // the old primary's, never started again
      },
    },
    async finals(resources) {
      const finals = [];
      for (const resource of resources) {
        const [row] = await admin(counters.port, 'SELECT value FROM counters WHERE resource = $1', [resource]);
        const accepted = await admin(counters.port, 'SELECT fence, token FROM accepted WHERE resource = $1 ORDER BY seq', [resource]);
        finals.push({ resource, value: Number(row?.value ?? 0), accepted: accepted.map(({ fence, token }) => ({ fence: Number(fence), token })) });
      }
      return finals;
    },
    async stop() {
      for (const slot of slots) for (const proxy of [slot.locks, slot.counters]) await proxy.close();
      locks.signal('SIGKILL');
      counters.signal('SIGKILL');
      await Promise.all([locks.exited, counters.exited]);
      removeCluster(cluster);
    },
  };
}
