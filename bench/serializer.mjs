// The serializer benchmark: this package beside a bare promise chain and the same chain with one
// AbortController per work (the floor), the libraries users pick instead (async-lock, p-queue and
// async-mutex, keyed; see runtimes/peers.mjs) — and `keyed-serializer.js`, the per-key serializer keyturn re-implements, when KEYTURN_SEED names its
// keyed-serializer.js — each in its own process, alternating, on 100 000 works over 1 key and
// over 1000 keys. Prints works/s (median over processes and rounds), cold (the first round of a
// fresh process) and warm (the rounds after it), with the ratios to the floor and to
// it, and the package's sizes. See serializer-one.mjs for the workloads.
//
//   node bench/serializer.mjs [--processes N] [--rounds N] [--works N] [--workloads own,own-signal,last]
//                             [--impls keyturn,seed,chain,floor,floor-listen,async-lock,p-queue,async-mutex]
//   KEYTURN_SEED=<path to keyed-serializer.js> node bench/serializer.mjs
//
// Not a test: it asserts nothing about speed. Numbers vary with the machine; compare ratios.
import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { gzipSync } from 'node:zlib';
import { fileURLToPath } from 'node:url';
import { dirname, join, resolve } from 'node:path';
import { given, median, option } from './runtimes/options.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const processes = Number(option('processes', 5));
const rounds = Number(option('rounds', 5));
const works = Number(option('works', 100000));
const workloads = option('workloads', 'own,own-signal,last').split(',');
const seed = process.env.KEYTURN_SEED ? resolve(process.env.KEYTURN_SEED) : undefined;
const impls = option('impls', ['keyturn', ...(seed ? ['seed'] : []), 'chain', 'floor'].join(',')).split(',');
// With a caller signal, also the floor that listens to it; in the workload users run, the
// libraries they pick instead (by default).
const signalImpls = given('impls') ? impls : [...impls, 'floor-listen'];
const ownImpls = given('impls') ? impls : [...impls, 'async-lock', 'p-queue', 'async-mutex'];


const describe = {
  own: 'every caller awaits its own result; works are async () => {}',
  'own-signal': 'the same, each call passing a caller signal (keyturn and floor-listen watch it; the others ignore it);\n× floor is the plain workload\'s floor',
  last: 'works are () => {}; only the last result per key is awaited',
};

console.log(`keyed serializer, ${works} works per round, ${processes} processes × (1 cold + ${rounds} warm) rounds, node ${process.version}`);
if (!seed) console.log('(no seed row: set KEYTURN_SEED to the path of keyed-serializer.js to add it)');
const floors = {};
for (const workload of workloads) {
  console.log('');
  console.log(`workload ${workload}: ${describe[workload]}`);
  console.log('keys    implementation   cold works/s  × floor  × seed    warm works/s  × floor  × seed');
  const rowImpls = workload === 'own-signal' ? signalImpls : workload === 'own' ? ownImpls : impls;
  for (const keys of [1, 1000]) {
    const cold = Object.fromEntries(rowImpls.map((impl) => [impl, []]));
    const warm = Object.fromEntries(rowImpls.map((impl) => [impl, []]));
    for (let p = 0; p < processes; p++) {
      for (const impl of rowImpls) {
        const out = execFileSync(process.execPath, [join(here, 'serializer-one.mjs'), impl, String(keys), String(works), String(rounds), workload], {
          env: { ...process.env, ...(seed ? { KEYTURN_SEED: seed } : {}) },
          encoding: 'utf8',
        });
        const result = JSON.parse(out);
        cold[impl].push(result.cold);
        warm[impl].push(...result.perSecond);
      }
    }
    const c = Object.fromEntries(rowImpls.map((impl) => [impl, median(cold[impl])]));
    const w = Object.fromEntries(rowImpls.map((impl) => [impl, median(warm[impl])]));
    // With a caller signal the floor is the plain workload's (the one a user compares with).
    const floor = workload === 'own-signal' && floors[`own:${keys}`] ? floors[`own:${keys}`] : { cold: c.floor, warm: w.floor };
    floors[`${workload}:${keys}`] = { cold: c.floor, warm: w.floor };
    const ratio = (value, base) => (base ? (value / base).toFixed(2) : '—').padStart(6);
    for (const impl of rowImpls) {
      console.log(
        `${String(keys).padEnd(7)} ${impl.padEnd(15)} ${Math.round(c[impl]).toString().padStart(13)} ${ratio(c[impl], floor.cold)}  ${ratio(c[impl], c.seed)}   ${Math.round(w[impl]).toString().padStart(13)} ${ratio(w[impl], floor.warm)}  ${ratio(w[impl], w.seed)}`,
      );
    }
    if (c['floor-listen'] && c.keyturn) {
      console.log(`${String(keys).padEnd(7)} keyturn ÷ floor-listen: cold ${ratio(c.keyturn, c['floor-listen']).trim()}, warm ${ratio(w.keyturn, w['floor-listen']).trim()}`);
    }
  }
}

const pkg = join(here, '..', 'pkg');
// `gzip -9` itself where it is installed (its deflate differs from zlib's by a few bytes).
const gz = (buffer) => {
  const cli = spawnSync('gzip', ['-9', '-c'], { input: buffer });
  return cli.status === 0 ? cli.stdout.length : gzipSync(buffer, { level: 9 }).length;
};
const wasm = readFileSync(join(pkg, 'keyturn_wasm_bg.wasm'));
const glue = ['keyturn_wasm.js', 'serializer.js', 'errors.js'].map((file) => readFileSync(join(pkg, file)));
const lockWasm = readFileSync(join(pkg, 'keyturn_lock_bg.wasm'));
console.log('');
console.log(`serializer wasm: ${wasm.length} B raw, ${gz(wasm)} B gzip -9   (targets: ≤ 40960 raw, ≤ 16384 gzip)`);
console.log(`serializer JS glue (keyturn_wasm.js + serializer.js + errors.js): ${glue.reduce((n, b) => n + b.length, 0)} B raw, ${gz(Buffer.concat(glue))} B gzip -9`);
console.log(`lock wasm (loaded on first acquireLock / new MemoryStore): ${lockWasm.length} B raw, ${gz(lockWasm)} B gzip -9`);
