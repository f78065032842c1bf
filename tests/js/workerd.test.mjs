// The package inside workerd (Miniflare): the workerd entry loads both wasm modules as compiled
// modules, and the Durable Object and R2 stores pass the contract over their real bindings.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';

import { Miniflare } from 'miniflare';

let mf;
before(async () => {
  mf = new Miniflare({
    modules: true,
    modulesRoot: fileURLToPath(new URL('../..', import.meta.url)),
    scriptPath: fileURLToPath(new URL('../workerd/contract-worker.mjs', import.meta.url)),
    modulesRules: [
      { type: 'ESModule', include: ['**/*.js', '**/*.mjs'] },
      { type: 'CompiledWasm', include: ['**/*.wasm'] },
    ],
    compatibilityDate: '2025-09-01',
    cf: false,
    r2Buckets: ['BUCKET'],
    durableObjects: { LOCKS: { className: 'LockDurableObject', useSQLite: true } },
  });
});
after(() => mf?.dispose());

for (const store of ['do', 'r2']) {
  test(`${store === 'do' ? 'DurableObjectStore' : 'R2Store'} passes the store contract inside workerd`, async () => {
    const response = await mf.dispatchFetch(`http://worker/contract?store=${store}`);
    assert.equal(response.status, 200, await response.clone().text());
    assert.deepEqual((await response.json()).failures, []);
  });
}
