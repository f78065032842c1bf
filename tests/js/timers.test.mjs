// No timer outlives what it serves: a deadline, a lock waiter's wait, a lease's end or its
// renewals. Each scenario runs in a process of its own, in both modes: the moment its work is
// done no timer is active, and the process exits at once — not when a 30 s deadline, a minute's
// wait or a minute's lease would have ended. tests/js/workerd.test.mjs counts the timers a burst
// leaves behind in workerd.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

import { MODES } from './modes.mjs';

const script = fileURLToPath(new URL('./timer-scenarios.mjs', import.meta.url));
const scenarios = [
  'two serializers over one store',
  'a renewed turn and a timed-out one',
  'withLock beside a long waiter',
  'a waiter served after a release',
  'uncontended acquisitions and releases',
  'a wait that keeps its script alive',
  'a deadline and an abort',
];

for (const { name: mode } of MODES) {
  for (const scenario of scenarios) {
    test(`${mode}: ${scenario} — no timer left, and the process exits at once`, () => {
      const started = Date.now();
      const result = spawnSync(process.execPath, [script, mode, scenario], { encoding: 'utf8', timeout: 20_000 });
      const elapsed = Date.now() - started;
      assert.equal(result.status, 0, result.stderr);
      assert.deepEqual(JSON.parse(result.stdout.trim()), [], 'active timers once the work is done');
      assert.ok(elapsed < 5_000, `the process took ${elapsed} ms to exit`);
    });
  }
}
