// A redis-server of one's own, for the tests, the benchmarks and the fault harness: on a free
// loopback port, ready once it answers PING, stopped by its PID (never another's).
import { spawn, spawnSync } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';

import { freePort } from './ports.mjs';

/** Whether this machine has redis-server. */
export const haveRedisServer = () => spawnSync('redis-server', ['--version']).status === 0;

/** Starts a redis-server with no persistence on a free loopback port: `{ port, process, stop() }`. */
export async function startRedisServer() {
  const port = await freePort();
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
  for (let i = 0; i < 100 && String(spawnSync('redis-cli', ['-p', String(port), 'ping']).stdout).trim() !== 'PONG'; i++) await sleep(50);
  return { port, process: child, stop: () => child.kill('SIGTERM') };
}
