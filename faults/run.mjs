// One run of the fault harness on one engine: 6 client processes, each its own keyturn
// instance, contend on three names — four with withLock, two with the serializer over a store —
// each turn a fenced increment of the name's counter, while a nemesis injects one fault after
// another. The two serializer clients also take a paced name (`rate` over the store), back to
// back, so that its pace always binds. One lock client's clock is 10 s ahead under maxClockSkewMs 11000, and one runs an
// hour ahead; over Redis and Postgres one client keeps 4 turns in flight. Then the faults heal, every client
// must acquire within the bound, and the checker reads the history.
//
//   node faults/run.mjs [--engine redis|durable-objects|postgres] [--seconds 40] [--history FILE]
//                       [--store-faults] [--injections N]
//                       [--plant skew|release|read-back|hog|fences|slots|pace]
//
// Engines: `redis`, redis-servers behind TCP proxies, two per client (faults/redis-engine.mjs:
// latency, lost answers, blackholes); `durable-objects`, workerd's Durable Objects shared by
// every client's workerd through a dev registry (faults/durable-objects-engine.mjs: isolates
// disposed mid-hold); `postgres`, postgresql servers behind TCP proxies, two per client
// (faults/postgres-engine.mjs: the server killed and restarted, paused past the lease,
// connections cut, lost answers). On each: clients paused (SIGSTOP) past their lease, and killed
// (SIGKILL) and started again. `--store-faults` injects the engine's store faults instead —
// faults that lose what the store held (Redis restarted without persistence, a failover that
// missed the last writes, an eviction; workerd killed and started again on its storage; a
// Postgres failover to a standby 200 ms behind) — with every
// clock within 4 ms of the machine's under maxClockSkewMs 10, as the promise of rising fences
// across a lost record asks. `--injections N` goes on until each kind was injected N times.
// `--plant` gives one lock client a planted bug (faults/turn.mjs), or, for `fences`, every
// client fences from the record alone, and for `pace`, every client's pace lets one start too
// many through a window (faults/planted-fences.sh): the checker must then find violations — the
// harness's self-test (faults/profiles.mjs).
//
// Prints a table per fault kind and, last, one JSON line. Exits 1 on any violation. Every
// process it starts is stopped by its PID; loopback only.
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';

import { check } from './checker.mjs';
import { processStat } from './processes.mjs';
import { faultTable } from './table.mjs';

const args = process.argv.slice(2);
const option = (name, otherwise) => (args.includes(name) ? args[args.indexOf(name) + 1] : otherwise);
const engineName = option('--engine', 'redis');
const seconds = Number(option('--seconds', 40));
const plant = option('--plant');
const historyFile = option('--history');
const storeFaults = args.includes('--store-faults');
const injections = Number(option('--injections', 0));
// Store faults keep clocks within the bound that rising fences across a lost record need. The
// planted hog's run keeps them together: the order check judges only waits between clients
// whose clocks agree, and with two clients skewed it judges too few to find the hog every time.
// After the heal, how long the clients at least run without a fault before the run ends.
const QUIET_MS = 3000;
const lease = { staleMs: 1000, waitMs: 4000, storeTimeoutMs: 500, maxClockSkewMs: storeFaults ? 10 : 11000 };
const [c1Skew, c4Skew] = storeFaults ? [4, -4] : plant === 'hog' ? [0, 0] : [10_000, 3_600_000];
// `gamma` is taken 3 at a time (a semaphore): each slot judged as a name, its holders counted.
const names = ['alpha', 'beta', 'gamma'];
const semaphores = { gamma: 3 };
// The paced name: a period short enough for many windows in a short run, and long against the
// milliseconds a hand-off of its lease takes, so that its pace, not the store, sets its starts.
const paced = { name: 'pace', limit: 3, periodMs: 300 };
// c2 is a busy isolate over Redis and Postgres: 4 turns in flight, so its holds are batches of turns.
// A planted bug goes to c1 (its clock skewed), the hog to c2 (the busy one); `fences` and `pace`
// are the package's own, in every client.
const packagePlants = { fences: 'record-fences', pace: 'pace-limit' };
const clientPlant = plant in packagePlants ? undefined : plant;
const clients = [
  { id: 'c0', mode: 'lock', skewMs: 0 },
  { id: 'c1', mode: 'lock', skewMs: c1Skew, plant: clientPlant === 'hog' ? undefined : clientPlant },
  { id: 'c2', mode: 'lock', skewMs: 0, inFlight: engineName === 'durable-objects' ? 1 : 4, plant: clientPlant === 'hog' ? clientPlant : undefined },
  { id: 'c3', mode: 'serializer', skewMs: 0, paced },
  { id: 'c4', mode: 'lock', skewMs: c4Skew },
  { id: 'c5', mode: 'serializer', skewMs: 0, paced },
];
// Its workerd clients load pkg/ itself; `fences` also needs store faults that lose records.
if (plant in packagePlants && engineName === 'durable-objects') throw new Error(`the planted bug \`${plant}\` runs over Redis or Postgres`);
// The planted package, built from the repository's sources (faults/planted-fences.sh).
const plantedDir = plant in packagePlants ? mkdtempSync(join(tmpdir(), `keyturn-planted-${plant}-`)) : undefined;
if (plantedDir !== undefined) {
  const built = spawnSync('bash', [fileURLToPath(new URL('./planted-fences.sh', import.meta.url)), join(plantedDir, 'pkg'), packagePlants[plant]], { stdio: 'inherit' });
  if (built.status !== 0) throw new Error('faults/planted-fences.sh failed');
}
const keyturn = plantedDir === undefined ? {} : { keyturn: join(plantedDir, 'pkg/node.mjs') };

// CLOCK_MONOTONIC: one clock for every process on the machine (performance.timeOrigin is each
// process's own estimate, and differs between processes by a fraction of a millisecond).
const real = () => Number(process.hrtime.bigint()) / 1e6;
/** The wall clock's distance from `real()`, taken where `Date.now()` ticks (workerd reads only the wall clock). */
function wallOffset() {
  const start = Date.now();
  while (Date.now() === start);
  return Date.now() - real();
}
const offsetMs = wallOffset();

const history = [];
const slots = []; // per client slot: { client, child, pids }
const pids = new Map(); // every process started → its command name, to stop by its PID at the end
/** Signals `pid` if it is still the process started (a PID is reused once its process is gone). */
function kill(pid, name) {
  if (processStat(pid)?.command !== pids.get(pid)) return;
  try {
    process.kill(pid, name);
  } catch {
    // gone meanwhile
  }
}
/** Signals a client's processes: its own, and the workerd it runs (pause, kill). */
const signal = (slot, name) => {
  for (const pid of [slots[slot].child.pid, ...slots[slot].pids]) kill(pid, name);
};
/** Signals a client's own process only (a request to it). */
const tell = (slot, name) => kill(slots[slot].child.pid, name);

/** Registers a process the engine started, to stop by its PID. */
const track = (pid, command) => pids.set(pid, command);
// Only the engine run is loaded: Miniflare alone takes a second or more to import on a busy machine.
const starters = {
  redis: async () => (await import('./redis-engine.mjs')).startRedisEngine,
  'durable-objects': async () => (await import('./durable-objects-engine.mjs')).startDurableObjectsEngine,
  postgres: async () => (await import('./postgres-engine.mjs')).startPostgresEngine,
};
if (!(engineName in starters)) throw new Error(`--engine: one of ${Object.keys(starters).join(', ')}, not ${engineName}`);
const engine = await (await starters[engineName]())({ lease, sleep, tell, track });

/** The counters of a name's turns: one per slot of a semaphore name, for its locks' and its serializers' turns. */
function counters(name) {
  const slots = semaphores[name] ?? 1;
  const of = (prefix) => (slots === 1 ? [`counter:${prefix}${name}`] : Array.from({ length: slots }, (_, k) => `counter:${prefix}${name}#${k}`));
  return [...of(''), ...of('turns:')];
}
const pacedCounter = `counter:turns:${paced.name}`;

async function startClient(slot, client) {
  const { script, config } = await engine.client(slot);
  const child = spawn(process.execPath, [script, JSON.stringify({ ...client, ...lease, names, semaphores, offsetMs, ...config, ...keyturn })], { stdio: ['ignore', 'pipe', 'inherit'] });
  pids.set(child.pid, 'node');
  let ready;
  slots[slot] = { client, child, pids: [], ready: new Promise((resolve) => (ready = resolve)) };
  createInterface({ input: child.stdout }).on('line', (line) => {
    let event;
    try {
      event = JSON.parse(line);
    } catch {
      history.push({ kind: 'crash', client: client.id, detail: `unreadable output: ${line}` });
      return;
    }
    if (event.kind !== 'ready') {
      history.push(event.kind === 'disposed' ? { ...event, at: real() } : event);
      return;
    }
    slots[slot].pids = event.pids;
    for (const pid of event.pids) pids.set(pid, 'workerd');
    ready();
  });
  history.push({ kind: 'client', client: client.id, skewMs: client.skewMs, inFlight: client.inFlight ?? 1 });
}

/** The faults every engine has: a client paused past its lease, and one killed and started again. */
const processFaults = {
  async 'paused past the lease'(slot) {
    const from = real();
    signal(slot, 'SIGSTOP');
    await sleep(lease.staleMs * 1.5);
    signal(slot, 'SIGCONT');
    history.push({ kind: 'paused', client: slots[slot].client.id, from, to: real() });
  },
  async killed(slot) {
    signal(slot, 'SIGKILL');
    const { client } = slots[slot];
    history.push({ kind: 'killed', client: client.id, at: real() });
    const [base, life = 0] = client.id.split('#');
    await startClient(slot, { ...client, id: `${base}#${Number(life) + 1}` });
    await sleep(lease.staleMs); // the others take its lease over meanwhile
  },
};

// Stopped from outside (Ctrl-C, a CI timeout): nothing it started outlives it.
for (const name of ['SIGINT', 'SIGTERM']) {
  process.on(name, () => {
    for (const pid of pids.keys()) kill(pid, 'SIGKILL');
    process.exit(1);
  });
}

let exitCode = 0;
try {
  for (const [slot, client] of clients.entries()) await startClient(slot, client);
  await Promise.all(slots.map(({ ready }) => ready));

  // The nemesis: one fault at a time on the next client, each followed by a quiet spell.
  const faults = storeFaults ? engine.storeFaults : { ...engine.faults, ...processFaults };
  const kinds = Object.keys(faults);
  const until = real() + seconds * 1000;
  for (let round = 0; real() < until || round < kinds.length * injections; round++) {
    const kind = kinds[round % kinds.length];
    const slot = round % slots.length;
    await slots[slot].ready; // a client started again after a kill may still be loading
    const from = real();
    await faults[kind](slot);
    // A fault of no one client (a fault of the store's server) reaches every client's writes.
    const reach = storeFaults ? { store: true } : faults[kind].length === 0 ? { everyone: true } : {};
    history.push({ kind: 'fault', fault: kind, client: slots[slot].client.id, from, to: real(), ...reach });
    await sleep(lease.staleMs / 2);
  }

  // Healed: every client alive must acquire within the bound (once it has loaded).
  // Each fault was undone before the next began: what is left to heal is a client still loading.
  await Promise.all(slots.map(({ ready }) => ready));
  const healedAt = real();
  history.push({ kind: 'healed', at: healedAt });
  // The run ends once every client has acquired since the heal — what the checker asks of it —
  // and the clients have run for QUIET_MS without a fault (the only waits the order check
  // judges: the faults come every half lease); or, if one has not acquired, a second past the
  // bound (the checker then finds it). Waiting out the bound every time cost the short profile
  // 6.5 s a run, 18 runs.
  const served = new Set();
  for (let seen = history.length, until = healedAt + lease.staleMs + lease.waitMs + lease.storeTimeoutMs + 1000; real() < until; await sleep(50)) {
    for (; seen < history.length; seen++) if (history[seen].kind === 'acquired' && history[seen].at >= healedAt) served.add(history[seen].client);
    if (real() >= healedAt + QUIET_MS && slots.every(({ client }) => served.has(client.id))) break;
  }
  const children = slots.map(({ child }) => child);
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
  await Promise.all(children.map((child) => (child.exitCode !== null || child.signalCode !== null ? undefined : new Promise((resolve) => child.once('exit', resolve)))));
  for (const final of await engine.finals([...names.flatMap((name) => counters(name)), pacedCounter])) history.push({ kind: 'final', ...final });

  const result = check(history, { ...lease, liveWithinMs: lease.staleMs + lease.waitMs + lease.storeTimeoutMs });
  // A history that broke a promise is kept for reading, asked for or not.
  const kept = historyFile ?? (result.violations.length > 0 ? join(tmpdir(), `keyturn-faults-${engine.name}-${process.pid}.jsonl`) : undefined);
  if (kept !== undefined) writeFileSync(kept, history.map((event) => JSON.stringify(event)).join('\n'));
  const { lines, summary } = faultTable(history, result);
  console.log(`fault harness over ${engine.name}: ${clients.length} clients, ${seconds} s of ${storeFaults ? 'store ' : ''}faults${plant ? `, bug planted: ${plant}` : ''}`);
  for (const line of lines) console.log(line);
  for (const violation of result.violations) console.log(`VIOLATION ${violation.property}: ${violation.detail}`);
  if (kept !== undefined) console.log(`history: ${kept}`);
  console.log(JSON.stringify({ engine: engine.name, store: storeFaults, plant: plant ?? null, ...summary }));
  if (result.violations.length > 0) exitCode = 1;
} finally {
  await engine.stop().catch(() => {});
  for (const pid of pids.keys()) kill(pid, 'SIGKILL');
  if (plantedDir !== undefined) rmSync(plantedDir, { recursive: true, force: true });
}
process.exit(exitCode);
