// The package inside workerd (Miniflare): the workerd entry loads both wasm modules as compiled
// modules, and the Durable Object and R2 stores pass the contract over their real bindings.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';

import { workerdWith } from '../runtimes/workerd.mjs';

let mf;
before(async () => {
  mf = workerdWith('tests/workerd/contract-worker.mjs');
});
after(() => mf?.dispose());

for (const store of ['do', 'r2']) {
  test(`${store === 'do' ? 'DurableObjectStore' : 'R2Store'} passes the store contract inside workerd`, async () => {
    const response = await mf.dispatchFetch(`http://worker/contract?store=${store}`);
    assert.equal(response.status, 200, await response.clone().text());
    assert.deepEqual((await response.json()).failures, []);
  });
}

test('the serializer across concurrent requests in workerd: each work runs in its own request, a hung one times out', async () => {
  const started = Date.now();
  const responses = await Promise.all([
    mf.dispatchFetch('http://worker/serialize?n=1'),
    mf.dispatchFetch('http://worker/serialize?n=2&hang=1'),
    mf.dispatchFetch('http://worker/serialize?n=3'),
    mf.dispatchFetch('http://worker/serialize?n=4'),
  ]);
  const bodies = await Promise.all(responses.map((response) => response.json()));
  assert.deepEqual(responses.map((response) => response.status), [200, 503, 200, 200]);
  assert.deepEqual(bodies, [
    { text: '1', aborted: false },
    { timedOut: 'k' },
    { text: '3', aborted: false },
    { text: '4', aborted: false },
  ]);
  assert.ok(Date.now() - started >= 100, 'the hung work held the key until its deadline');
});
