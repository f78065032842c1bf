// `make faults`: the short profile. The harness runs once as it is — no violation may be found —
// and once with each planted bug, each of which the checker must find. Exits 1 otherwise.
//
//   node faults/self-test.mjs [--seconds 16]
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const args = process.argv.slice(2);
const seconds = args.includes('--seconds') ? args[args.indexOf('--seconds') + 1] : '16';
const run = fileURLToPath(new URL('./run.mjs', import.meta.url));
let failed = false;
for (const plant of [undefined, 'skew', 'cas']) {
  const result = spawnSync(process.execPath, [run, '--seconds', seconds, ...(plant ? ['--plant', plant] : [])], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
  const lines = result.stdout.trim().split('\n');
  const summary = JSON.parse(lines.at(-1));
  const ok = plant === undefined ? summary.violations === 0 && result.status === 0 : summary.violations > 0;
  if (plant === undefined) console.log(lines.filter((line) => !line.startsWith('VIOLATION')).slice(0, -1).join('\n'));
  console.log(`${plant === undefined ? 'as it is' : `planted ${plant}`}: ${summary.operations} operations, ${summary.faults} faults, ${summary.violations} violations — ${ok ? 'as expected' : 'NOT as expected'}`);
  failed ||= !ok;
}
process.exit(failed ? 1 : 0);
