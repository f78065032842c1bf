// A postgresql server of one's own, for the tests, the benchmarks and the fault harness: a
// cluster made by initdb in a temporary directory, listening on a loopback port of its own and
// on a unix socket in that directory (never the system's /var/run/postgresql), ready once
// pg_isready says so, stopped by its PID (never another's). Started again with the same `port`
// and `dir`, it is the same cluster, its data kept: what a server killed and restarted is.
//
// postgres refuses to run as root: as root the cluster belongs to the `postgres` user and the
// server runs as that user (spawned with its uid, so the PID is the postmaster's own, and a
// signal sent to it — SIGKILL, SIGSTOP — reaches the server itself, not a wrapper).
import { spawn, spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

import { freePort } from './ports.mjs';

/**
 * The directory of the server's binaries: `KEYTURN_PG_BIN` if set, else the newest under
 * Debian's /usr/lib/postgresql/<version>/bin, else what `pg_config --bindir` says; or undefined.
 */
function binDir() {
  if (process.env.KEYTURN_PG_BIN) return process.env.KEYTURN_PG_BIN;
  const root = '/usr/lib/postgresql';
  const versions = existsSync(root)
    ? readdirSync(root)
        .filter((name) => existsSync(join(root, name, 'bin', 'postgres')))
        .sort((a, b) => Number(b) - Number(a))
    : [];
  if (versions.length > 0) return join(root, versions[0], 'bin');
  const configured = spawnSync('pg_config', ['--bindir'], { encoding: 'utf8' });
  return configured.status === 0 ? configured.stdout.trim() : undefined;
}

const BIN = binDir();

/** Whether this machine has the postgresql server (`postgres`, `initdb`, `pg_isready`). */
export const havePostgresServer = () => BIN !== undefined && ['postgres', 'initdb', 'pg_isready'].every((tool) => existsSync(join(BIN, tool)));

/** As root: the `postgres` user's ids, which the server runs as. Otherwise: none (run as oneself). */
function serverUser() {
  if (process.getuid?.() !== 0) return {};
  const id = (flag) => Number(String(spawnSync('id', [flag, 'postgres']).stdout).trim());
  const [uid, gid] = [id('-u'), id('-g')];
  if (!Number.isInteger(uid) || !Number.isInteger(gid)) throw new Error('running as root, and there is no `postgres` user to run the server as');
  return { uid, gid };
}

/**
 * Starts a postgresql server (default: a new cluster in a new temporary directory, on a free
 * loopback port). `dir` and `port` of a server started before start it again over the same
 * data. `args` are more server arguments (`['-c', 'max_connections=200']`, say). The cluster
 * trusts local connections: user `postgres`, database `postgres`, no password.
 *
 * Answers `{ host, port, socketDir, dir, url, process, exited, stop(signal), close() }`:
 * `exited` resolves once the server process is gone; `stop` signals it by its PID (SIGINT, a
 * fast shutdown, unless told: SIGKILL, SIGSTOP, SIGCONT …); `close()` stops it, waits for it to
 * exit and removes the directory.
 * @param {{ port?: number, dir?: string, args?: string[] }} [options]
 */
export async function startPostgresServer({ port, dir, args = [] } = {}) {
  if (!havePostgresServer()) throw new Error('no postgresql server binaries (/usr/lib/postgresql/*/bin)');
  port ??= await freePort();
  const user = serverUser();
  if (dir === undefined) {
    dir = mkdtempSync(join(tmpdir(), 'keyturn-pg-'));
    if (user.uid !== undefined) chownSync(dir, user.uid, user.gid);
  }
  const data = join(dir, 'data');
  const socketDir = join(dir, 'run');
  if (!existsSync(join(data, 'PG_VERSION'))) {
    const made = spawnSync(join(BIN, 'initdb'), ['-D', data, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--locale=C', '--no-sync'], { ...user, encoding: 'utf8' });
    if (made.status !== 0) throw new Error(`initdb failed: ${made.stderr || made.error}`);
  }
  if (!existsSync(socketDir)) {
    mkdirSync(socketDir);
    if (user.uid !== undefined) chownSync(socketDir, user.uid, user.gid);
  }
  // fsync off: a test server need not survive the machine's crash, and a killed server's
  // writes are in the OS's cache, which a restart reads (the fault harness's kill -9 and
  // restart lose nothing acknowledged). Small shared buffers: several servers may run at once.
  const child = spawn(
    join(BIN, 'postgres'),
    ['-D', data, '-p', String(port), '-k', socketDir, '-c', 'listen_addresses=127.0.0.1', '-c', 'fsync=off', '-c', 'shared_buffers=32MB', '-c', 'max_connections=200', ...args],
    { ...user, stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let log = '';
  child.stderr.on('data', (chunk) => {
    log = (log + chunk).slice(-4000);
  });
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve(signal ?? code)));
  let gone = false;
  exited.then(() => {
    gone = true;
  });
  for (let i = 0; ; i++) {
    if (spawnSync(join(BIN, 'pg_isready'), ['-q', '-h', '127.0.0.1', '-p', String(port), '-U', 'postgres']).status === 0) break;
    if (gone || i >= 300) {
      child.kill('SIGKILL');
      throw new Error(`postgres did not start on port ${port}: ${log}`);
    }
    await sleep(50);
  }
  const stop = (signal = 'SIGINT') => {
    if (!gone) child.kill(signal);
  };
  return {
    host: '127.0.0.1',
    port,
    socketDir,
    dir,
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    process: child,
    exited,
    stop,
    async close() {
      if (!gone) {
        child.kill('SIGCONT'); // a paused server hears no SIGINT
        child.kill('SIGINT');
        const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
        await exited;
        clearTimeout(timer);
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
