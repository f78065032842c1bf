// The fault harness's Postgres engine: a postgresql server of its own for the lock records
// (PostgresStore's table), another for the fenced counters (what the checker reads must outlive
// the store's faults), and in front of them two TCP proxies per client slot (faults/proxy.mjs).
// Its faults: the lock records' server killed (SIGKILL of every process) and started again on
// its directory, and paused (SIGSTOP) past the lease — neither loses a commit — a client's
// connections cut (stalled past the lease, then reset), and an answer lost after the server
// applied the write. Its store fault loses the last writes: a failover to a standby that missed
// them (a crash-consistent copy of the server's directory taken 200 ms before the server dies,
// started on its port — what an asynchronous replica lagging that much gives).
import { spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readFileSync, readdirSync, readlinkSync, realpathSync, renameSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { PostgresStore } from 'keyturn';
import pg from 'pg';

import { startPostgresServer } from '../tests/runtimes/postgres-server.mjs';
import { ClientProxies } from './proxy.mjs';

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
 * The processes of the server on `dir`'s cluster: every process named `postgres` working in its
 * data directory (a postgres process's working directory is its cluster's), as `{ pid, state }`
 * (`T`: stopped). The postmaster's children are not enough: one it forks while being signalled
 * is not yet listed, and once it is dead they are init's.
 */
function serverProcesses(dir) {
  let data;
  try {
    data = realpathSync(join(dir, 'data'));
  } catch {
    return []; // its directory removed: none left
  }
  const found = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readlinkSync(`/proc/${entry}/cwd`) !== data) continue;
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      if (stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')) !== 'postgres') continue;
      found.push({ pid: Number(entry), state: stat[stat.lastIndexOf(')') + 2] });
    } catch {
      // gone meanwhile, or not ours to read
    }
  }
  return found;
}

/**
 * Signals every process of a server — the postmaster and the backends it forked — each by its
 * PID, listed again until the signal has taken (SIGKILL: none left; SIGSTOP: every one
 * stopped), so that none forked meanwhile is missed: a SIGKILL or SIGSTOP of the postmaster
 * alone leaves its backends serving their connections, and one left over keeps the cluster's
 * shared memory, so that no server starts on it again. The postmaster goes first (it forks
 * nothing once stopped); SIGCONT reaches it last.
 */
async function signalServer(server, name) {
  const postmaster = server.process.pid;
  const send = (pid, signal) => {
    try {
      process.kill(pid, signal);
    } catch {
      // gone meanwhile
    }
  };
  const done = (left) => (name === 'SIGKILL' ? left.length === 0 : name === 'SIGSTOP' ? left.every(({ state }) => state === 'T') : true);
  for (let round = 0; round < 200; round++) {
    const found = serverProcesses(server.dir);
    if (round > 0 && done(found)) return;
    const pids = found.map(({ pid }) => pid).sort((a, b) => (a === postmaster ? -1 : b === postmaster ? 1 : 0));
    if (name === 'SIGCONT') pids.reverse();
    for (const pid of pids) send(pid, name);
    if (name === 'SIGCONT') return;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  throw new Error(`postgres on port ${server.port}: ${name} did not take in a second`);
}

/**
 * A copy of the cluster in directory `from` (its `data`), in a new directory owned as `from` is,
 * for a server to start in. With `frozen`, the server running on `from`, the copy is taken while
 * every process of it is stopped: what a crash now would leave, which a server started on the
 * copy recovers to (a standby as of now). The new directory goes into `made` at once.
 */
async function copyCluster(from, frozen, made) {
  const dir = mkdtempSync(join(tmpdir(), 'keyturn-faults-postgres-'));
  made?.add(dir);
  const { uid, gid } = statSync(join(from, 'data'));
  chownSync(dir, uid, gid);
  if (frozen !== undefined) await signalServer(frozen, 'SIGSTOP');
  try {
    const copied = spawnSync('cp', ['-a', join(from, 'data'), join(dir, 'data')], { encoding: 'utf8' });
    if (copied.status !== 0) throw new Error(`copying ${from} failed: ${copied.stderr}`);
  } finally {
    if (frozen !== undefined) await signalServer(frozen, 'SIGCONT');
  }
  // Its lock file names the running server: a server started on the copy would take it for a
  // live one in its directory and refuse to start.
  rmSync(join(dir, 'data', 'postmaster.pid'), { force: true });
  return dir;
}

/**
 * The lock records' server, on a fresh cluster. initdb is most of a run's start on a busy
 * machine: with KEYTURN_FAULTS_POSTGRES_TEMPLATE (a directory faults/profiles.mjs keeps for its
 * runs) the cluster is a copy of the one kept there, which the first run makes.
 */
async function startFresh() {
  const template = process.env.KEYTURN_FAULTS_POSTGRES_TEMPLATE;
  if (template !== undefined && existsSync(join(template, 'data', 'PG_VERSION'))) return startPostgresServer({ dir: await copyCluster(template) });
  const server = await startPostgresServer();
  if (template !== undefined) {
    // Whole or not at all: a run stopped halfway leaves no half a cluster for the next one.
    const copy = await copyCluster(server.dir, server);
    renameSync(join(copy, 'data'), join(template, 'data'));
    rmSync(copy, { recursive: true, force: true });
  }
  return server;
}

/**
 * `track(pid, command)` registers each postmaster started, for the harness to stop by its PID
 * (its backends go with it in `stop`). A store fault keeps the store away for more than
 * `maxClockSkewMs` after it lost data (docs/guarantees.md, "What the lock promises").
 */
export async function startPostgresEngine({ lease, sleep, track }) {
  // Every cluster directory made, removed at the end even when the run is stopped from outside
  // (run.mjs then kills the servers and exits without stopping the engine).
  const dirs = new Set();
  process.once('exit', () => {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });
  const own = (server) => (dirs.add(server.dir), server);
  let locks = own(await startFresh());
  // The counters' server on a copy of the fresh cluster: one initdb a run at most, not two.
  const counters = own(await startPostgresServer({ dir: await copyCluster(locks.dir, locks, dirs) }));
  for (const server of [locks, counters]) track(server.process.pid, 'postgres');
  await admin(counters.port, COUNTERS_SCHEMA);
  // The lock records' table, made once here, before any client runs (the store's documented call).
  const setupPool = new pg.Pool({ host: '127.0.0.1', port: locks.port, user: 'postgres', database: 'postgres', max: 1 });
  await new PostgresStore((text, params) => setupPool.query(text, params).then((r) => r.rows)).setup();
  await setupPool.end();

  const target = ({ port }) => ({ host: '127.0.0.1', port });
  const proxies = new ClientProxies(clientScript, () => target(locks), () => target(counters));
  const awayMs = lease.maxClockSkewMs + 20;
  /** The lock records' server killed, every process of it at once (a crashed machine). */
  const killLocks = async () => {
    await signalServer(locks, 'SIGKILL');
    await locks.exited;
  };
  /** A server on `dir`'s cluster (the same one, or a standby's) on the same port. */
  const restartLocks = async (dir) => {
    locks = await startPostgresServer({ dir, port: locks.port });
    track(locks.process.pid, 'postgres');
  };
  return {
    name: 'postgres',
    client: (slot) => proxies.client(slot),
    faults: {
      async 'server killed (kill -9) and restarted'() {
        await killLocks();
        await restartLocks(locks.dir);
      },
      async 'server paused past the lease'() {
        await signalServer(locks, 'SIGSTOP');
        await sleep(lease.staleMs * 1.5);
        await signalServer(locks, 'SIGCONT');
      },
      async 'connections cut past the lease'(slot) {
        await Promise.all(proxies.of(slot).map((proxy) => proxy.blackhole(lease.staleMs * 1.5)));
      },
      async 'answer lost after it applied'(slot) {
        for (const proxy of proxies.of(slot)) proxy.loseAnswers(1);
        await sleep(lease.staleMs / 2);
      },
    },
    storeFaults: {
      async 'failover, last writes missed'() {
        const standby = await copyCluster(locks.dir, locks, dirs);
        await sleep(200); // the writes of these milliseconds reach the old primary only
        const old = locks.dir;
        await killLocks();
        await sleep(awayMs);
        await restartLocks(standby);
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
      await proxies.close();
      for (const server of [locks, counters]) await signalServer(server, 'SIGKILL').catch(() => {});
      await Promise.all([locks.exited, counters.exited]);
      for (const server of [locks, counters]) rmSync(server.dir, { recursive: true, force: true });
    },
  };
}
