// The serializer benchmark: this package, the seed, a bare promise chain and the same chain
// with one AbortController per work (the floor), each in its own process, alternating, on
// 100 000 no-op works over 1 key and over 1000 keys. Prints works/s (median of every measured
// round of every process), the ratio to the seed and to the floor, and the package's size.
//
//   node bench/serializer.mjs [--processes N] [--rounds N] [--works N] [--async]
//
// Not a test: it asserts nothing about speed. Numbers vary with the machine; compare ratios.
import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { gzipSync } from 'node:zlib';
import { fileURLToPath } from 'node:url';
import { dirname, join } from 'node:path';

const here = dirname(fileURLToPath(import.meta.url));
const args = process.argv.slice(2);
const option = (name, fallback) => {
  const at = args.indexOf(`--${name}`);
  return at === -1 ? fallback : Number(args[at + 1]);
};
const processes = option('processes', 5);
const rounds = option('rounds', 5);
const works = option('works', 100000);
const asyncWorks = args.includes('--async');
const impls = ['keyturn', 'seed', 'chain', 'floor'];

const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
};

const results = {};
for (const keys of [1, 1000]) {
  const samples = Object.fromEntries(impls.map((impl) => [impl, []]));
  for (let p = 0; p < processes; p++) {
    for (const impl of impls) {
      const out = execFileSync(process.execPath, [join(here, 'serializer-one.mjs'), impl, String(keys), String(works), String(rounds)], {
        env: { ...process.env, ...(asyncWorks ? { ASYNC: '1' } : {}) },
        encoding: 'utf8',
      });
      samples[impl].push(...JSON.parse(out).perSecond);
    }
  }
  results[keys] = Object.fromEntries(impls.map((impl) => [impl, median(samples[impl])]));
}

const kind = asyncWorks ? 'async no-op (async () => {})' : 'no-op (() => {})';
console.log(`keyed serializer, ${works} ${kind} works per round, ${processes} processes × ${rounds} rounds each, node ${process.version}`);
console.log('');
console.log('keys    implementation     works/s   × seed   × floor');
for (const keys of [1, 1000]) {
  for (const impl of impls) {
    const perSecond = results[keys][impl];
    console.log(
      `${String(keys).padEnd(7)} ${impl.padEnd(15)} ${Math.round(perSecond).toString().padStart(10)}   ${(perSecond / results[keys].seed).toFixed(2).padStart(5)}   ${(perSecond / results[keys].floor).toFixed(2).padStart(6)}`,
    );
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
