// The lease rules under faults in workerd: the scenarios of lease-scenarios.mjs with each op in
// one of two isolates (two workers) sharing a Durable Object namespace and an R2 bucket.
// lease-rules.test.mjs runs the same in Node.
import { after, before, test } from 'node:test';

import { workerdPair } from '../runtimes/workerd.mjs';
import { SCENARIOS } from './lease-scenarios.mjs';

let mf;
before(() => {
  mf = workerdPair('tests/workerd/lease-worker.mjs');
});
after(() => mf?.dispose());

async function run(isolate, step) {
  const worker = await mf.getWorker(isolate);
  const response = await worker.fetch('http://worker/', { method: 'POST', body: JSON.stringify(step) });
  if (response.status !== 200) throw new Error(`${isolate}: ${response.status} ${await response.text()}`);
  return response.json();
}

for (const scenario of SCENARIOS) test(scenario.name, () => scenario.run(run, 'workerd'));
