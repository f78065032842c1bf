// A workerd isolate disposed after it asked for a name costs the next taker one offer (100 ms),
// never a lease: two workerd instances, each its own isolate, share one Durable Object namespace
// through a dev registry (as the fault harness's clients do), and the second is thrown away
// while its request waits for the name the first holds.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { Miniflare } from 'miniflare';

import { worker } from '../runtimes/workerd.mjs';

const ENGINE = 'keyturn-disposed-a';
let registry;
let a;

before(async () => {
  registry = mkdtempSync(join(tmpdir(), 'keyturn-disposed-'));
  a = new Miniflare({
    name: ENGINE,
    ...worker('tests/workerd/lease-worker.mjs'),
    cf: false,
    r2Buckets: ['BUCKET'],
    durableObjects: { LOCKS: { className: 'LockDurableObject', useSQLite: true } },
    unsafeDevRegistryPath: registry,
  });
  await a.ready;
});
after(async () => {
  await a?.dispose();
  if (registry !== undefined) rmSync(registry, { recursive: true, force: true });
});

/** One op of tests/js/lease-ops.mjs in `mf`'s isolate. */
async function run(mf, step) {
  const response = await mf.dispatchFetch('http://worker/', { method: 'POST', body: JSON.stringify(step) });
  if (response.status !== 200) throw new Error(`${response.status} ${await response.text()}`);
  return response.json();
}

test('a workerd isolate disposed after it asked costs the next taker one offer (100 ms), never a lease', async () => {
  const b = new Miniflare({
    name: 'keyturn-disposed-b',
    ...worker('tests/workerd/lease-worker.mjs'),
    cf: false,
    r2Buckets: ['BUCKET'],
    durableObjects: { LOCKS: { className: 'LockDurableObject', scriptName: ENGINE, useSQLite: true } },
    unsafeDevRegistryPath: registry,
  });
  await b.ready;
  const name = 'disposed';
  // Held 800 ms: B has asked and gone (about 200 ms in on a busy machine) long before A lets go.
  const holding = run(a, { op: 'acquire', name, holdMs: 800, staleMs: 5000 });
  await new Promise((resolve) => setTimeout(resolve, 50));
  // B asks for the name, then its isolate goes while its request waits.
  const waiting = run(b, { op: 'acquire', name, waitMs: 10_000, staleMs: 5000 }).catch((error) => error);
  let asked;
  for (let i = 0; i < 100 && asked === undefined; i++) {
    asked = (await run(a, { op: 'read', name })).record.asks;
    if (asked === undefined) await new Promise((resolve) => setTimeout(resolve, 10));
  }
  assert.ok(asked, 'B asked');
  await b.dispose();
  await waiting;
  assert.equal((await holding).held, true);
  // A's release offered the name to B first; A takes it once that offer ran out.
  const next = await run(a, { op: 'acquire', name, waitMs: 3000, staleMs: 5000 });
  assert.equal(next.held, true, JSON.stringify(next));
  assert.ok(next.ms < 1000, `taken after ${next.ms} ms, not the 5 s lease`);
  assert.equal((await run(a, { op: 'read', name })).record.asks, undefined, 'the lapsed ask is gone');
});
