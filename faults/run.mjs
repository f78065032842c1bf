// The fault harness over redis-server: 6 client processes (faults/client.mjs), each behind its
// own TCP proxy (faults/proxy.mjs), contend on two names: four with withLock, two with the
// serializer over a store, while a nemesis adds latency, loses answers the server applied, blackholes a
// client past its lease, pauses one (SIGSTOP) past its lease and kills one (SIGKILL). The lock
// clients' clocks are skewed ±5 s under maxClockSkewMs 11000 (two clocks differ by up to 10 s),
// and one runs an hour ahead. Then the faults heal, every client must acquire within the bound,
// and the checker reads the history.
//
//   node faults/run.mjs [--seconds 40] [--history FILE] [--plant skew|cas]
//
// `--plant` gives one lock client a planted bug (see client.mjs); the checker must then find
// violations: the harness's self-test.
//
// Prints a table per fault kind and, last, one JSON line. Exits 1 on any violation. Every
// process it starts is stopped by its PID; loopback only.
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';

import { createClient } from 'redis';

import { startRedisServer } from '../tests/runtimes/redis-server.mjs';
import { FaultProxy } from './proxy.mjs';
import { check } from './checker.mjs';

const args = process.argv.slice(2);
const seconds = Number(args[args.indexOf('--seconds') + 1] || 40);
const plant = args.includes('--plant') ? args[args.indexOf('--plant') + 1] : undefined;
const historyFile = args.includes('--history') ? args[args.indexOf('--history') + 1] : undefined;
const here = fileURLToPath(new URL('.', import.meta.url));
const lease = { staleMs: 1000, waitMs: 4000, storeTimeoutMs: 500, maxClockSkewMs: 11000 };
const names = ['alpha', 'beta'];
const clients = [
  { id: 'c0', mode: 'lock', skewMs: 0 },
  { id: 'c1', mode: 'lock', skewMs: 5000, plant },
  { id: 'c2', mode: 'lock', skewMs: -5000 },
  { id: 'c3', mode: 'serializer', skewMs: 0 },
  { id: 'c4', mode: 'lock', skewMs: 3_600_000 },
  { id: 'c5', mode: 'serializer', skewMs: 0 },
];

// CLOCK_MONOTONIC: one clock for every process on the machine (performance.timeOrigin is each
// process's own estimate, and differs between processes by a fraction of a millisecond).
const real = () => Number(process.hrtime.bigint()) / 1e6;
const history = [];
const faults = {};
const fault = (kind) => {
  faults[kind] = (faults[kind] ?? 0) + 1;
};
const children = new Set();

function startClient(client, port) {
  const child = spawn(process.execPath, [`${here}client.mjs`, JSON.stringify({ ...client, ...lease, port, names })], { stdio: ['ignore', 'pipe', 'inherit'] });
  children.add(child);
  child.on('exit', () => children.delete(child));
  createInterface({ input: child.stdout }).on('line', (line) => {
    try {
      history.push(JSON.parse(line));
    } catch {
      history.push({ kind: 'crash', client: client.id, detail: `unreadable output: ${line}` });
    }
  });
  history.push({ kind: 'client', client: client.id, skewMs: client.skewMs });
  return child;
}

const redisServer = await startRedisServer();
const redisPort = redisServer.port;
children.add(redisServer.process);
let exitCode = 0;
try {
  const proxies = [];
  const processes = [];
  for (const client of clients) {
    const proxy = new FaultProxy({ host: '127.0.0.1', port: redisPort });
    const port = await proxy.listen();
    proxies.push({ proxy, port });
    processes.push(startClient(client, port));
  }

  // The nemesis: one fault at a time, each followed by a quiet spell.
  const phase = seconds * 1000 / 8;
  const pick = (i) => i % clients.length;
  for (let round = 0; round < 8; round++) {
    const target = pick(round);
    const { proxy } = proxies[target];
    switch (round % 4) {
      case 0:
        for (const p of proxies) p.proxy.setLatency(0, 200);
        fault('latency 0–200 ms');
        await sleep(phase / 2);
        for (const p of proxies) p.proxy.setLatency(0);
        break;
      case 1:
        for (let i = 0; i < 3; i++) {
          proxies[pick(target + i)].proxy.loseAnswers(1);
          fault('answer lost after it applied');
          await sleep(phase / 6);
        }
        break;
      case 2:
        fault('blackhole past the lease');
        await proxy.blackhole(lease.staleMs * 1.5);
        break;
      case 3: {
        const child = processes[target];
        const from = real();
        child.kill('SIGSTOP');
        fault('paused past the lease');
        await sleep(lease.staleMs * 1.5);
        child.kill('SIGCONT');
        history.push({ kind: 'paused', client: clients[target].id, from, to: real() });
        break;
      }
    }
    await sleep(phase / 2);
  }
  // Killed mid-run, and started again as a new client on the same proxy.
  const victim = 1;
  processes[victim].kill('SIGKILL');
  history.push({ kind: 'killed', client: clients[victim].id, at: real() });
  fault('killed');
  const reborn = { ...clients[victim], id: `${clients[victim].id}'` };
  clients.push(reborn);
  processes.push(startClient(reborn, proxies[victim].port));

  // Healed: every client alive must acquire within the bound.
  for (const p of proxies) p.proxy.setLatency(0);
  history.push({ kind: 'healed', at: real() });
  await sleep(lease.staleMs + lease.waitMs + lease.storeTimeoutMs + 1000);
  for (const child of processes) if (child.exitCode === null) child.kill('SIGTERM');
  await Promise.all(processes.map((child) => (child.exitCode !== null || child.signalCode !== null ? undefined : new Promise((resolve) => child.once('exit', resolve)))));
  for (const { proxy } of proxies) await proxy.close();

  const redis = await createClient({ url: `redis://127.0.0.1:${redisPort}` }).connect();
  for (const resource of names.flatMap((name) => [`counter:${name}`, `counter:turns:${name}`])) {
    const value = Number((await redis.hGet(resource, 'value')) ?? 0);
    const accepted = (await redis.lRange(`${resource}:accepted`, 0, -1)).map((entry) => {
      const [fence, token] = entry.split(' ');
      return { fence: Number(fence), token };
    });
    history.push({ kind: 'final', resource, value, accepted });
  }
  await redis.quit();

  if (historyFile !== undefined) writeFileSync(historyFile, history.map((event) => JSON.stringify(event)).join('\n'));
  const { violations, leases, writes } = check(history, { ...lease, liveWithinMs: lease.staleMs + lease.waitMs + lease.storeTimeoutMs });
  const waits = history.filter((e) => e.kind === 'acquired').map((e) => e.waitedMs).sort((a, b) => a - b);
  const quantile = (q) => (waits.length === 0 ? NaN : waits[Math.min(waits.length - 1, Math.floor(q * waits.length))]);
  const failed = history.filter((e) => e.kind === 'failed').length;
  console.log(`fault harness over redis-server: ${clients.length} clients, ${seconds} s of faults${plant ? `, bug planted: ${plant}` : ''}`);
  console.log('fault kind                        injected');
  for (const [kind, count] of Object.entries(faults)) console.log(`${kind.padEnd(33)} ${String(count).padStart(8)}`);
  console.log(`operations: ${leases} acquisitions, ${writes} fenced writes, ${failed} failed turns; acquisition latency p50 ${quantile(0.5).toFixed(1)} ms, p99 ${quantile(0.99).toFixed(1)} ms`);
  for (const violation of violations) console.log(`VIOLATION ${violation.property}: ${violation.detail}`);
  console.log(JSON.stringify({ engine: 'redis', plant: plant ?? null, operations: leases + writes, faults: Object.values(faults).reduce((a, b) => a + b, 0), violations: violations.length, p50Ms: quantile(0.5), p99Ms: quantile(0.99) }));
  if (violations.length > 0) exitCode = 1;
} finally {
  for (const child of children) child.kill('SIGKILL');
}
process.exit(exitCode);
