// A key's pace in workerd (Miniflare; tests/workerd/pace-worker.mjs), each call its own request:
// a waiting work's pace is kept by a timer in its own request, as on Cloudflare. Nine concurrent
// requests on one key at 3 starts per 300 ms start three by three, a pace apart, in order of
// arrival; a request with ifAvailable is refused while the pace holds, with when to retry.
// Start times are workerd's clock as each work read it in its own request. workerd moves a
// request's clock only across its I/O and timers, so the reading a work takes in its request and
// the engine's, taken in the request whose event started it, can be a few ms apart: CLOCK_MS
// allowance (a pace that let one start too many through reads about 0 ms apart). The upper
// bound carries seconds of margin.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';

import { Miniflare } from 'miniflare';

import { worker } from '../runtimes/workerd.mjs';

const CLOCK_MS = 10;

let mf;
before(async () => {
  mf = new Miniflare({ ...worker('tests/workerd/pace-worker.mjs'), cf: false });
  await mf.ready;
});
after(() => mf?.dispose());

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
