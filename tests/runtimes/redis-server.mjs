// A redis-server of one's own, for the tests, the benchmarks and the fault harness: on a free
// loopback port (or a given one: the same server started again), ready once it answers PING,
// stopped by its PID (never another's).
import { spawn, spawnSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';

import { freePort } from './ports.mjs';

/** Whether this machine has redis-server. */
export const haveRedisServer = () => spawnSync('redis-server', ['--version']).status === 0;

/**
 * Starts a redis-server with no persistence on `port` (default: a free loopback port), with
 * `args` besides (`['--replicaof', host, port]`, say): `{ port, process, stop(signal), exited }`.
 * `exited` resolves once the process is gone; `stop` signals it (SIGTERM unless told).
 */
export async function startRedisServer({ port, args = [] } = {}) {
  port ??= await freePort();
  // Its directory is a temporary one: a replica's full sync writes a file there.
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', tmpdir(), ...args], { stdio: 'ignore' });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  for (let i = 0; i < 100 && String(spawnSync('redis-cli', ['-p', String(port), 'ping']).stdout).trim() !== 'PONG'; i++) await sleep(50);
  return { port, process: child, exited, stop: (signal = 'SIGTERM') => child.kill(signal) };
}
