// A postgresql server of the fault harness's own (Debian's postgresql 15): a cluster in a
// temporary directory on a loopback port, run as the `postgres` user (postgres refuses root),
// ready once pg_isready says so. The harness's faults act on all of its processes at once — the
// postmaster and the backends it forked — each signalled by its PID: killed (SIGKILL, as a
// crashed machine or container), paused (SIGSTOP) and resumed, or frozen while its directory is
// copied (a crash-consistent copy: what a server started on it recovers to).
import { spawn, spawnSync } from 'node:child_process';
import { chownSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

import { freePort } from '../tests/runtimes/ports.mjs';
import { childrenNamed } from './processes.mjs';

const BIN = '/usr/lib/postgresql/15/bin';

/** The `postgres` user's ids, which the server's processes and files take. */
function postgresUser() {
  const id = (flag) => Number(String(spawnSync('id', [flag, 'postgres']).stdout).trim());
  return { uid: id('-u'), gid: id('-g') };
}

/**
 * A fresh cluster (trust on loopback, user `postgres`) in a temporary directory: `{ root, data }`.
 * WAL segments of 1 MB keep a copy of the directory small.
 */
export function initCluster() {
  const user = postgresUser();
  const root = mkdtempSync(join(tmpdir(), 'keyturn-faults-postgres-'));
  chownSync(root, user.uid, user.gid);
  const data = join(root, 'data');
  const made = spawnSync(`${BIN}/initdb`, ['-D', data, '--auth=trust', '-U', 'postgres', '-E', 'UTF8', '--locale=C.UTF-8', '--no-sync', '--wal-segsize=1'], { ...user, encoding: 'utf8' });
  if (made.status !== 0) throw new Error(`initdb failed: ${made.stderr}`);
  return { root, data };
}

/** A copy of the cluster directory `from` (its server stopped or frozen) as `name` beside it, owned as it is. */
export function copyCluster({ root }, from, name) {
  const data = join(root, name);
  const copied = spawnSync('cp', ['-a', from, data], { encoding: 'utf8' });
  if (copied.status !== 0) throw new Error(`copying ${from} failed: ${copied.stderr}`);
  return { root, data };
}

/**
 * Starts a server on the cluster at `data` on `port` (default: a free loopback port):
 * `{ port, data, process, pids(), signal(name), exited }`. Durable across SIGKILL of its
 * processes (a commit is written to the OS before it answers; fsync off: the machine does not
 * crash, only the server's processes); no Unix socket, loopback TCP only.
 */
export async function startPostgresServer({ data, port }) {
  port ??= await freePort();
  const settings = {
    listen_addresses: '127.0.0.1',
    port: String(port),
    unix_socket_directories: '',
    max_connections: '300',
    shared_buffers: '16MB',
    fsync: 'off',
    full_page_writes: 'off',
    synchronous_commit: 'on',
    logging_collector: 'off',
    log_min_messages: 'fatal',
  };
  const args = ['-D', data, ...Object.entries(settings).flatMap(([name, value]) => ['-c', `${name}=${value}`])];
  const child = spawn(`${BIN}/postgres`, args, { ...postgresUser(), stdio: 'ignore' });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  let gone = false;
  exited.then(() => (gone = true));
  // Crash recovery after a kill may take a while on a busy machine.
  for (let i = 0; i < 400 && !gone && spawnSync(`${BIN}/pg_isready`, ['-q', '-h', '127.0.0.1', '-p', String(port)]).status !== 0; i++) await sleep(25);
  if (gone) throw new Error(`postgres on port ${port} exited while starting`);
  /** The postmaster and every process it forked (backends, checkpointer, …), all named `postgres`. */
  const pids = () => [child.pid, ...childrenNamed(child.pid, 'postgres')];
  return {
    port,
    data,
    process: child,
    exited,
    pids,
    /**
     * Signals every process of the server. The postmaster is stopped first, so that it forks
     * nothing meanwhile and its children are still its own (a dead one's go to init) while they
     * are listed; SIGCONT goes to the children first, for the same reason.
     */
    signal(name) {
      if (gone) return;
      const send = (pid, signal) => {
        try {
          process.kill(pid, signal);
        } catch {
          // gone meanwhile
        }
      };
      if (name !== 'SIGCONT') send(child.pid, 'SIGSTOP');
      for (const pid of childrenNamed(child.pid, 'postgres')) send(pid, name);
      send(child.pid, name);
    },
  };
}

/** Removes a cluster's directory (its servers stopped). */
export const removeCluster = ({ root }) => rmSync(root, { recursive: true, force: true });
