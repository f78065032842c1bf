// One benchmark process: `node serializer-one.mjs <impl> <keys> <works> <rounds> <workload>`
// prints JSON {impl, keys, works, workload, cold, perSecond: [...]}: works/s of the process's
// first round (`cold`: a fresh process, nothing compiled or warmed yet) and of each measured
// round after it (warm).
//
// Workloads:
// - `own`: every caller awaits its own result (an async function per call), and the works are
//   `async () => {}` — what a request handler does;
// - `own-signal`: the same, each call passing a caller `signal` of its own (made before the
//   clock starts, as a handler passes `request.signal`, which the runtime made);
// - `last`: works are `() => {}` and only the last result per key is awaited (the flattering
//   one, kept for comparison with earlier figures).
//
// Implementations: `keyturn`; `seed` (only when KEYTURN_SEED names
// keyed-serializer.js); `chain` (a bare promise chain) and `floor` (the chain with one
// AbortController per work, the one cost no implementation that hands out a real signal avoids);
// `floor-listen`, the floor that also listens to each caller's signal until its call settles;
// and the libraries users pick instead (runtimes/peers.mjs): `async-lock`, `p-queue`,
// `async-mutex`, each keyed and with its own timeout.
import { createRequire } from 'node:module';

import { bareChain } from './runtimes/bare-chain.mjs';
import { peers } from './runtimes/peers.mjs';

const [impl, keysArg, worksArg, roundsArg, workload = 'own'] = process.argv.slice(2);
const keys = Number(keysArg);
const works = Number(worksArg);
const rounds = Number(roundsArg);
const require = createRequire(import.meta.url);

const noop = () => {};

async function factory() {
  switch (impl) {
    case 'keyturn':
      return (await import('keyturn')).createKeyedSerializer;
    case 'seed':
      if (!process.env.KEYTURN_SEED) throw new Error('the seed row needs KEYTURN_SEED=<path to keyed-serializer.js>');
      return require(process.env.KEYTURN_SEED).createKeyedSerializer;
    case 'chain':
      return () => bareChain({ abort: false });
    case 'floor':
      return () => bareChain();
    case 'floor-listen':
      return () => bareChain({ listen: true });
    default:
      if (peers[impl]) return peers[impl];
      throw new Error(`unknown implementation ${impl}`);
  }
}

const create = await factory();
const names = Array.from({ length: keys }, (_, i) => `object-${i}`);

const asyncWork = async () => {};

async function ownRound(serialize, withSignal, signals) {
  const callers = new Array(works);
  if (withSignal) {
    // Each caller passes its own signal, made before the clock starts — as a request handler
    // passes `request.signal`, which the runtime made.
    const call = async (key, signal) => {
      await serialize(key, asyncWork, { signal });
    };
    for (let i = 0; i < works; i++) callers[i] = call(names[i % keys], signals[i]);
  } else {
    const call = async (key) => {
      await serialize(key, asyncWork);
    };
    for (let i = 0; i < works; i++) callers[i] = call(names[i % keys]);
  }
  await Promise.all(callers);
}

async function lastRound(serialize) {
  const last = new Array(keys);
  for (let i = 0; i < works; i++) last[i % keys] = serialize(names[i % keys], noop);
  await Promise.all(last);
}

async function round() {
  const serialize = create();
  const signals = workload === 'own-signal' ? Array.from({ length: works }, () => new AbortController().signal) : undefined;
  const started = performance.now();
  if (workload === 'last') await lastRound(serialize);
  else await ownRound(serialize, workload === 'own-signal', signals);
  const elapsed = performance.now() - started;
  if (serialize.pending && serialize.pending() !== 0) throw new Error(`${impl}: pending() is not 0 after the round`);
  return works / (elapsed / 1000);
}

const cold = await round();
const perSecond = [];
for (let i = 0; i < rounds; i++) perSecond.push(await round());
process.stdout.write(JSON.stringify({ impl, keys, works, workload, cold, perSecond }) + '\n');
