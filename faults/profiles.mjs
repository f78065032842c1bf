// The fault harness's two profiles, each a few runs of faults/run.mjs:
// - `short` (`make faults`, which CI runs after `make test`; about 6½ minutes): each engine —
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
//   node faults/profiles.mjs short|long [--seconds N]
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const PLANTED_SECONDS = '6';

const args = process.argv.slice(2);
const profile = args[0];
if (profile !== 'short' && profile !== 'long') throw new Error('usage: node faults/profiles.mjs short|long [--seconds N]');
const seconds = args.includes('--seconds') ? args[args.indexOf('--seconds') + 1] : profile === 'short' ? '12' : '360';
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

let failed = false;
const totals = { operations: 0, faults: 0, violations: 0, engines: {}, planted: {} };
for (const { engine, seconds: length, plant, flags = [] } of runs) {
  const started = performance.now();
  const result = spawnSync(process.execPath, [run, '--engine', engine, '--seconds', length, ...flags, ...(plant ? ['--plant', plant, '--history', '/dev/null'] : [])], { encoding: 'utf8', env, stdio: ['ignore', 'pipe', 'inherit'] });
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
  console.log(`${engine}${how}${plant === undefined ? '' : `, bug planted: ${plant}`}: ${summary.operations} operations, ${summary.faults} faults, ${summary.violations} violations — ${ok ? 'as expected' : 'NOT as expected'} (${((performance.now() - started) / 1000).toFixed(0)} s)\n`);
  failed ||= !ok;
}
console.log(JSON.stringify(totals));
process.exit(failed ? 1 : 0);
