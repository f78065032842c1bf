// Coalescing calls in one isolate: 100 000 calls on one key, in bursts queued behind a running
// work, each caller awaiting its own result, with `coalesce: true` and without (plain calls,
// each a queued work). Reports calls/s (cold: a fresh process's first round; warm: the median of
// the rounds after) and runs per call. Each variant runs in processes of its own, alternating.
//
//   node bench/coalescing.mjs [--calls 100000] [--burst 1000] [--rounds 5] [--processes 5]
//
// The last line is one JSON object. Not a test.
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { median, numberOption } from './runtimes/options.mjs';

const calls = numberOption('calls', 100_000);
const burst = numberOption('burst', 1000);
const rounds = numberOption('rounds', 5);
const processes = numberOption('processes', 5);
const [first, second] = process.argv.slice(2);
const variant = first === '--child' ? second : undefined;


/** One round: `calls` calls in bursts, each burst queued behind a work that has not run yet. */
async function round(serialize, coalesce) {
  const options = coalesce ? { coalesce: true } : undefined;
  let runs = 0;
  const work = async () => {
    runs += 1;
  };
  const own = async () => {
    await serialize('k', work, options);
  };
  const started = performance.now();
  for (let sent = 0; sent < calls; sent += burst) {
    let open;
    const gate = new Promise((resolve) => (open = resolve));
    const running = serialize('k', () => gate);
    const waiting = [];
    for (let i = 0; i < burst; i++) waiting.push(own());
    open();
    await running;
    await Promise.all(waiting);
  }
  return { perSecond: (calls / (performance.now() - started)) * 1000, runsPerCall: runs / calls };
}

if (variant !== undefined) {
  const { createKeyedSerializer } = await import('keyturn');
  const results = [];
  for (let i = 0; i <= rounds; i++) results.push(await round(createKeyedSerializer(), variant === 'coalescing'));
  console.log(JSON.stringify({ cold: results[0].perSecond, warm: median(results.slice(1).map((r) => r.perSecond)), runsPerCall: results[1].runsPerCall }));
} else {
  const self = fileURLToPath(import.meta.url);
  const seen = { coalescing: [], plain: [] };
  for (let p = 0; p < processes; p++) {
    for (const name of p % 2 ? ['plain', 'coalescing'] : ['coalescing', 'plain']) {
      const out = execFileSync(process.execPath, [self, '--child', name, '--calls', String(calls), '--burst', String(burst), '--rounds', String(rounds)], { encoding: 'utf8' });
      seen[name].push(JSON.parse(out.trim().split('\n').pop()));
    }
  }
  const row = (name) => ({
    cold: Math.round(median(seen[name].map((r) => r.cold))),
    warm: Math.round(median(seen[name].map((r) => r.warm))),
    runsPerCall: seen[name][0].runsPerCall,
  });
  const result = { calls, burst, coalescing: row('coalescing'), plain: row('plain') };
  console.log(`coalescing calls: ${calls} calls on one key in bursts of ${burst} behind a running work, every caller awaiting its own result; ${processes} processes × (1 cold + ${rounds} warm) rounds, node ${process.version}`);
  console.log('calls       cold calls/s   warm calls/s   runs per call');
  for (const name of ['coalescing', 'plain']) {
    const r = result[name];
    console.log(`${name.padEnd(10)}  ${String(r.cold).padStart(12)}   ${String(r.warm).padStart(12)}   ${r.runsPerCall.toFixed(4)}`);
  }
  console.log(`a joining call costs ${(result.plain.warm / result.coalescing.warm).toFixed(2)}× a queued work's time, warm (${(result.plain.cold / result.coalescing.cold).toFixed(2)}× cold)`);
  console.log(JSON.stringify(result));
}
