// The busy key of busy-key.mjs across two workerd isolates over Durable Objects: a call in one
// isolate is not overtaken without bound by a busy key in the other, with the objects' wake-ups
// and without (polling). Figures in bench/README.md (bench/cross-isolate.mjs).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';

import { workerdPair } from '../runtimes/workerd.mjs';
import { BUSY_MACHINE_MS, busyKeyInWorkerd, quantile } from './busy-key.mjs';

let mf;
before(() => {
  mf = workerdPair('tests/workerd/busy-worker.mjs');
});
after(() => mf?.dispose());

for (const polls of [false, true]) {
  test(`a busy key in one workerd isolate: a call in the other waits about one batch, not for it to idle (${polls ? 'three methods' : 'wake-ups'})`, async () => {
    const { waits, turnsOfA, callsPerTurnOfB, callsOfBPerTurn } = await busyKeyInWorkerd(mf, { polls, ms: 2000 });
    const [p50, max] = [quantile(waits, 0.5), quantile(waits, 1)];
    const report = `p50 ${p50} ms, max ${max} ms, B's calls ${callsOfBPerTurn.toFixed(1)} and both's ${callsPerTurnOfB.toFixed(1)} per turn of B, ${waits.length} turns of B, ${turnsOfA} of A`;
    assert.ok(waits.length >= 30, report);
    assert.ok(turnsOfA > 100, `A keeps its pace: ${report}`);
    // The bounds of "Turns round isolates", each with BUSY_MACHINE_MS more: real time between
    // two isolates, which a busy machine stretches; held exactly on mocked time in
    // cross-isolate.test.mjs. A caller left waiting for the holder to idle waits the whole run.
    assert.ok(p50 <= (polls ? 60 : 15) + BUSY_MACHINE_MS, report);
    assert.ok(max <= (polls ? 250 : 100) + BUSY_MACHINE_MS, report);
    assert.ok(callsOfBPerTurn <= (polls ? 40 : 16), report);
  });
}
