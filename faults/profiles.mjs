// The fault harness's two profiles, each a few runs of faults/run.mjs:
// - `short` (`make faults`, which CI runs after `make test`; about 4–5 minutes): each engine —
//   Redis, Durable Objects, Postgres — once as it is and once with its store faults, each
//   injected 10 times at least — no violation may be found — then the harness's self-test, one
//   run over Redis and one over Postgres with each planted bug, each of which the checker must
//   find (`fences` with the store faults, which it needs);
// - `long` (`make faults-long`): each engine for `--seconds` (default 360) as it is, and for
//   half that with its store faults.
// Prints each run's table (a run as it is that finds a violation keeps its history and says
// where; a planted bug's run keeps none), and last one JSON line: the totals of the runs as they
// are, and the planted bugs found. Exits 1 when a run as it is finds a violation or a planted bug goes unseen.
//
// The runs that must find no violation go one at a time: each has the machine to itself. The
// planted bugs' runs go `--jobs` at a time (default 2: each waits on its engine's start-up and its
// quiet end more than it computes; a busy machine does not hide a planted bug, it only slows the
// runs). Each run's output is printed whole, in the list's order.
//
//   node faults/profiles.mjs short|long [--seconds N] [--jobs N]
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const PLANTED_SECONDS = '6';

const args = process.argv.slice(2);
const profile = args[0];
if (profile !== 'short' && profile !== 'long') throw new Error('usage: node faults/profiles.mjs short|long [--seconds N]');
const seconds = args.includes('--seconds') ? args[args.indexOf('--seconds') + 1] : profile === 'short' ? '12' : '360';
const jobs = Number(args.includes('--jobs') ? args[args.indexOf('--jobs') + 1] : 2);
if (!(Number.isInteger(jobs) && jobs >= 1)) throw new Error('--jobs: a whole number, 1 or more');
const run = fileURLToPath(new URL('./run.mjs', import.meta.url));
const engines = ['redis', 'durable-objects', 'postgres'];
const store = ['--store-faults', ...(profile === 'short' ? ['--injections', '10'] : [])];
// Each planted bug on each engine whose faults it needs (Durable Objects has no store fault that
// loses a record, which `fences` needs, and its clients load pkg/ itself, not a planted build);
// each is found within seconds.
const planted = ['redis', 'postgres'].flatMap((engine) => [
  ...['skew', 'release', 'read-back', 'hog', 'slots', 'pace'].map((plant) => ({ engine, seconds: PLANTED_SECONDS, plant })),
  { engine, seconds: PLANTED_SECONDS, plant: 'fences', flags: ['--store-faults'] },
]);
const runs = [
  ...engines.map((engine) => ({ engine, seconds })),
  ...engines.map((engine) => ({ engine, seconds: profile === 'short' ? '8' : String(seconds / 2), flags: store })),
  ...(profile === 'short' ? planted : []),
];

// A fresh postgresql cluster for the Postgres runs to copy (faults/postgres-engine.mjs): initdb
// once, not once a run.
const postgresTemplate = mkdtempSync(join(tmpdir(), 'keyturn-faults-postgres-template-'));
process.on('exit', () => rmSync(postgresTemplate, { recursive: true, force: true }));
const env = { ...process.env, KEYTURN_FAULTS_POSTGRES_TEMPLATE: postgresTemplate };

/** One run of faults/run.mjs: its exit status and its output, with how long it took. */
function start({ engine, seconds: length, plant, flags = [] }) {
  const started = performance.now();
  const child = spawn(process.execPath, [run, '--engine', engine, '--seconds', length, ...flags, ...(plant ? ['--plant', plant, '--history', '/dev/null'] : [])], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (chunk) => (stdout += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk) => (stderr += chunk));
  return new Promise((resolve) => child.on('close', (status) => resolve({ status, stdout, stderr, ms: performance.now() - started })));
}

let failed = false;
const totals = { operations: 0, faults: 0, violations: 0, engines: {}, planted: {} };
/** Prints a run's output and its line, and counts it. */
function report({ engine, plant, flags = [] }, result) {
  if (result.stderr !== '') process.stderr.write(result.stderr);
  const lines = result.stdout.trim().split('\n');
  let summary;
  try {
    summary = JSON.parse(lines.at(-1));
  } catch {
    summary = { operations: 0, faults: 0, violations: NaN };
  }
  const ok = plant === undefined ? summary.violations === 0 && result.status === 0 : summary.violations > 0;
  if (plant === undefined) {
    console.log(lines.slice(0, -1).join('\n'));
    totals.operations += summary.operations;
    totals.faults += summary.faults;
    totals.violations += summary.violations;
    totals.engines[`${engine}${flags.includes('--store-faults') ? ', store faults' : ''}`] = { operations: summary.operations, faults: summary.faults, violations: summary.violations, p50Ms: summary.p50Ms, p99Ms: summary.p99Ms };
  } else {
    totals.planted[engine] = { ...totals.planted[engine], [plant]: summary.violations > 0 ? 'found' : 'NOT FOUND' };
  }
  const how = flags.includes('--store-faults') ? ', store faults' : plant === undefined ? ', as it is' : '';
  console.log(`${engine}${how}${plant === undefined ? '' : `, bug planted: ${plant}`}: ${summary.operations} operations, ${summary.faults} faults, ${summary.violations} violations — ${ok ? 'as expected' : 'NOT as expected'} (${(result.ms / 1000).toFixed(0)} s)\n`);
  failed ||= !ok;
}

/** Runs `list` `at` a time, taken in its order; each reported once those before it were. */
async function runAll(list, at) {
  const results = list.map(() => {
    let resolve;
    const promise = new Promise((settle) => (resolve = settle));
    return { promise, resolve };
  });
  let next = 0;
  const worker = async () => {
    for (let i = next++; i < list.length; i = next++) results[i].resolve(await start(list[i]));
  };
  const workers = Array.from({ length: Math.min(at, list.length) }, worker);
  for (const [i, one] of list.entries()) report(one, await results[i].promise);
  await Promise.all(workers);
}
await runAll(runs.filter(({ plant }) => plant === undefined), 1);
await runAll(runs.filter(({ plant }) => plant !== undefined), jobs);
console.log(JSON.stringify(totals));
process.exit(failed ? 1 : 0);
