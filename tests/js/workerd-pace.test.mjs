// A key's pace in workerd (Miniflare; tests/workerd/pace-worker.mjs), each call its own request:
// a waiting work's pace is kept by a timer in its own request, as on Cloudflare. Nine concurrent
// requests on one key at 3 starts per 300 ms start three by three, a pace apart, in order of
// arrival; a request with ifAvailable is refused while the pace holds, with when to retry.
// Start times are workerd's clock as each work read it in its own request. workerd moves a
// request's clock only across its I/O and timers, so the reading a work takes in its request and
// the engine's, taken in the request whose event started it, can be a few ms apart: CLOCK_MS
// allowance (a pace that let one start too many through reads about 0 ms apart). The upper
// bound carries seconds of margin.
//
// Paced works that fetch a loopback upstream (30–80 ms): a request whose work is told it may
// start by another request's timer — the line's last call watches a start 1 s after it was
// told, the period here, so its timer and the next work's pace come together — hears it by a
// reaction workerd does not wait for, and must keep a timer of its own meanwhile, or workerd
// cancels it as hung (a 500). Every request is answered, each within a wide bound.
import { createServer } from 'node:http';
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';

import { Miniflare } from 'miniflare';

import { worker } from '../runtimes/workerd.mjs';

const CLOCK_MS = 10;

let mf;
let upstream;
before(async () => {
  upstream = createServer((request, response) => setTimeout(() => response.end('ok'), 30 + Math.random() * 50));
  await new Promise((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  const bindings = { UPSTREAM: `http://127.0.0.1:${upstream.address().port}` };
  mf = new Miniflare({ ...worker('tests/workerd/pace-worker.mjs'), cf: false, bindings });
  await mf.ready;
});
after(async () => {
  await mf?.dispose();
  upstream?.close();
});

const get = async (path) => (await mf.dispatchFetch(`http://worker${path}`)).json();

test('nine requests on one key at 3 per 300 ms start three by three, a pace apart; ifAvailable is refused meanwhile', async () => {
  const sent = Date.now();
  const calls = Array.from({ length: 9 }, () => get('/call?key=k'));
  const refused = await get('/try?key=k');
  const starts = (await Promise.all(calls)).map((answer) => answer.started).sort((a, b) => a - b);
  for (let i = 0; i + 3 < starts.length; i++) {
    assert.ok(starts[i + 3] - starts[i] >= 300 - CLOCK_MS, `starts ${i} and ${i + 3}: ${starts.map((s) => s - starts[0])}`);
  }
  assert.ok(starts[8] - sent < 600 + 3000, `the ninth started ${starts[8] - sent} ms after the first was sent`);
  assert.equal(refused.error, 'SerializedWorkUnavailable');
  const stats = await get('/stats');
  assert.equal(stats.started, 9);
  assert.equal(stats.unavailable, 1);
  assert.ok(stats.paced >= 2, JSON.stringify(stats));
});

test('ifAvailable on a key whose pace allows a start runs at once', async () => {
  const answer = await get('/try?key=free');
  assert.equal(typeof answer.started, 'number');
});

/**
 * `count` concurrent requests on one key of the fetching serializer at `n` at a time and `n`
 * per second: each one's status and answer.
 * @param {number} n
 * @param {number} count
 */
async function fetchingRequests(n, count) {
  return Promise.all(
    Array.from({ length: count }, async () => {
      // Far past the ~count / n seconds the pace takes: a request nobody answers fails the test.
      const response = await mf.dispatchFetch(`http://worker/fetch?key=k${n}&n=${n}`, { signal: AbortSignal.timeout(60_000) });
      const text = await response.text();
      return { status: response.status, body: response.status === 200 ? JSON.parse(text) : text.slice(0, 200) };
    }),
  );
}

for (const [n, count] of [
  [1, 8],
  [2, 12],
]) {
  test(`${count} requests on one key at ${n} at a time and ${n} per second, whose works fetch: each answered, paced`, async () => {
    const answers = await fetchingRequests(n, count);
    const failed = answers.filter((answer) => answer.status !== 200);
    assert.deepEqual(failed, [], `${failed.length} of ${count} not answered`);
    assert.ok(answers.every((answer) => answer.body.upstream === 'ok'));
    const starts = answers.map((answer) => answer.body.started).sort((a, b) => a - b);
    for (let i = 0; i + n < starts.length; i++) {
      assert.ok(starts[i + n] - starts[i] >= 1000 - CLOCK_MS, `starts ${i} and ${i + n}: ${starts.map((s) => s - starts[0])}`);
    }
  });
}
