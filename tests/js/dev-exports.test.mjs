// The example worker's exports and searches routes under load through `make serve` (what
// `make dev` runs, without its build): wrangler dev, offline, its Durable Objects simulated,
// calling a slow upstream of this test's own (tests/runtimes/upstream.mjs). 3 tenants × 30
// concurrent exports: every one answered, never more than 2 of a tenant at the upstream at once,
// and each slot's fences rising. Searches, paced at 5 per second per tenant and 2 at once: 30
// concurrent for one tenant and 10 for another, and `?wait=0` refused with Retry-After while
// the pace holds.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';

import { freePort } from '../runtimes/ports.mjs';
import { startUpstream } from '../runtimes/upstream.mjs';

const root = fileURLToPath(new URL('../..', import.meta.url));
let upstream;
let dev;
let port;
let output = '';

before(async () => {
  upstream = await startUpstream();
  port = await freePort();
  dev = spawn('make', ['--no-print-directory', 'serve', `PORT=${port}`, `VARS=--var UPSTREAM_URL:http://127.0.0.1:${upstream.port}`], {
    cwd: root,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  dev.stdout.on('data', (chunk) => (output += chunk));
  dev.stderr.on('data', (chunk) => (output += chunk));
  // Ready once it answers.
  for (let i = 0; i < 600; i++) {
    try {
      await fetch(`http://127.0.0.1:${port}/boards/ready`);
      return;
    } catch {
      await sleep(100);
    }
  }
  throw new Error(`wrangler dev did not start:\n${output}`);
});

after(() => {
  if (dev !== undefined) {
    try {
      process.kill(-dev.pid, 'SIGTERM');
    } catch {
      // gone already
    }
  }
  upstream?.close();
});

test('make serve: 3 tenants × 30 concurrent exports, at most 2 per tenant at the upstream at once', async () => {
  const tenants = ['acme', 'globex', 'initech'];
  const started = performance.now();
  const responses = await Promise.all(
    tenants.flatMap((tenant) => Array.from({ length: 30 }, () => fetch(`http://127.0.0.1:${port}/tenants/${tenant}/exports`, { method: 'POST' }))),
  );
  const elapsedMs = performance.now() - started;
  const bodies = await Promise.all(responses.map((response) => response.json()));
  assert.deepEqual(responses.map((response) => response.status), Array(90).fill(200), JSON.stringify(bodies.find((body) => body.error)));
  for (const tenant of tenants) {
    const seen = upstream.tenants.get(tenant);
    assert.equal(seen.calls, 30);
    assert.equal(seen.most, 2, `${tenant}: the most calls at once`);
    assert.equal(seen.refused, 0, `${tenant}: every fence above its slot's last`);
    assert.deepEqual([...seen.fences.keys()].sort(), [0, 1], `${tenant}: both slots used`);
  }
  assert.ok(bodies.every((body) => body.upstream.status === 200 && (body.slot === 0 || body.slot === 1)));
  // 30 exports of 30–80 ms, two at a time: about 0.8 s per tenant, the tenants side by side.
  assert.ok(elapsedMs < 8000, `${elapsedMs.toFixed(0)} ms`);
  // A bad tenant id gets a 400, nothing written.
  assert.equal((await fetch(`http://127.0.0.1:${port}/tenants/a%20b/exports`, { method: 'POST' })).status, 400);
});

// The upstream reads its clock as each search arrives, after a trip through workerd's fetch and
// the loopback that a busy machine can stretch for one search and not for the one a pace later,
// and the search's start is written to its tenant's pace record (the route runs 2 at once) before
// it is called, up to one Durable Object round trip earlier — which a busy machine stretches too:
// so two arrivals a period apart may read up to CLOCK_MS closer. A pace that let a sixth search
// through within the period would read about 0 ms apart (the first five arrive together).
const CLOCK_MS = 250;
const PERIOD_MS = 1000;
const LIMIT = 5;

/** No `LIMIT + 1` of `arrivals` (ms) within PERIOD_MS, allowing CLOCK_MS. */
function assertPaced(tenant, arrivals) {
  const sorted = [...arrivals].sort((a, b) => a - b);
  for (let i = 0; i + LIMIT < sorted.length; i++) {
    const gap = sorted[i + LIMIT] - sorted[i];
    assert.ok(gap >= PERIOD_MS - CLOCK_MS, `${tenant}: arrivals ${i} and ${i + LIMIT} are ${gap.toFixed(1)} ms apart: ${sorted.map((at) => (at - sorted[0]).toFixed(0))}`);
  }
}

const search = (tenant, query = '') => fetch(`http://127.0.0.1:${port}/tenants/${tenant}/search?q=${encodeURIComponent(query)}`);

test('make serve: searches paced per tenant — 30 and 10 concurrent: 5 per second, at most 2 at once, neither tenant held up by the other', async () => {
  const counts = { umbrella: 30, hooli: 10 };
  const done = { umbrella: [], hooli: [] };
  const t0 = performance.now();
  const responses = await Promise.all(
    Object.entries(counts).flatMap(([tenant, n]) =>
      Array.from({ length: n }, async (_, i) => {
        const response = await search(tenant, `q${i}`);
        done[tenant].push(performance.now() - t0);
        const text = await response.text();
        let body;
        try {
          body = JSON.parse(text);
        } catch {
          body = text;
        }
        return { tenant, status: response.status, body };
      }),
    ),
  );
  const failed = responses.find((r) => r.status !== 200);
  assert.equal(failed, undefined, JSON.stringify(failed));
  for (const [tenant, n] of Object.entries(counts)) {
    const seen = upstream.searches.get(tenant);
    assert.equal(seen.arrivals.length, n, `${tenant}: searches at the upstream`);
    assert.ok(seen.most >= 1 && seen.most <= 2, `${tenant}: ${seen.most} at once at the upstream`);
    assertPaced(tenant, seen.arrivals);
    const mine = responses.filter((r) => r.tenant === tenant);
    assert.ok(mine.every((r) => r.body.upstream.status === 200 && (r.body.slot === 0 || r.body.slot === 1)));
  }
  // 30 at 5 a second: the 30th starts 5 periods after the first; 10: one period after. Were
  // hooli's searches in line behind umbrella's, its last would arrive after umbrella's last.
  const last = (tenant) => Math.max(...upstream.searches.get(tenant).arrivals);
  const first = (tenant) => Math.min(...upstream.searches.get(tenant).arrivals);
  assert.ok(last('umbrella') - first('umbrella') >= 5 * (PERIOD_MS - CLOCK_MS), 'umbrella: 30 searches over 5 periods');
  assert.ok(last('hooli') < last('umbrella') - 2000, `hooli's last arrived at ${(last('hooli') - t0).toFixed(0)} ms, umbrella's at ${(last('umbrella') - t0).toFixed(0)} ms`);
  assert.ok(Math.max(...done.hooli) < Math.max(...done.umbrella) - 2000, 'hooli answered long before umbrella');
  // A bad tenant or wait gets a 400, nothing sent upstream.
  assert.equal((await fetch(`http://127.0.0.1:${port}/tenants/a%20b/search`)).status, 400);
  assert.equal((await fetch(`http://127.0.0.1:${port}/tenants/hooli/search?wait=maybe`)).status, 400);
  assert.equal(upstream.searches.get('hooli').arrivals.length, 10);
});

test('make serve: a search with wait=0 is refused with a 429 and Retry-After while its tenant\'s pace holds, and runs once it allows', async (t) => {
  const tenant = 'vandelay';
  const sent = performance.now();
  const five = await Promise.all(Array.from({ length: LIMIT }, () => search(tenant)));
  assert.deepEqual(five.map((response) => response.status), Array(LIMIT).fill(200));
  await Promise.all(five.map((response) => response.json()));
  const elapsed = performance.now() - sent;
  if (elapsed > PERIOD_MS - 300) {
    // Five searches took most of a period on a loaded machine: the pace may allow a sixth by now.
    t.skip(`five searches took ${elapsed.toFixed(0)} ms`);
    return;
  }
  const refused = await fetch(`http://127.0.0.1:${port}/tenants/${tenant}/search?wait=0`);
  assert.equal(refused.status, 429);
  assert.equal(refused.headers.get('retry-after'), '1');
  const { retryAfterMs } = await refused.json();
  assert.ok(retryAfterMs > 0 && retryAfterMs <= PERIOD_MS, `retryAfterMs ${retryAfterMs}`);
  assert.equal(upstream.searches.get(tenant).arrivals.length, LIMIT, 'the refused search never reached the upstream');
  await sleep(retryAfterMs + 50);
  const later = await fetch(`http://127.0.0.1:${port}/tenants/${tenant}/search?wait=0`);
  assert.equal(later.status, 200, JSON.stringify(await later.clone().json()));
  assert.equal(upstream.searches.get(tenant).arrivals.length, LIMIT + 1);
});
