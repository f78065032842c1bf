// The example worker's exports route under load through `make serve` (what `make dev` runs,
// without its build): wrangler dev, offline, its Durable Objects simulated, calling a slow
// upstream of this test's own (tests/runtimes/upstream.mjs). 3 tenants × 30 concurrent exports:
// every one answered, never more than 2 of a tenant at the upstream at once, and each slot's
// fences rising.
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
