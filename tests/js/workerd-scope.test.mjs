// A serializer without a store on Workers orders each key within one isolate only, and a Worker
// runs in many: its first call says so, once (console.warn), unless it was made with
// scope: 'isolate' — or with a store. In workerd (Miniflare, tests/workerd/scope-worker.mjs),
// the worker's console output captured; on Node (one process, one isolate) nothing is said.
// Also the option's checks, and tracing in workerd: published with nodejs_compat, and nothing
// loaded or broken without it.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';

import { Miniflare } from 'miniflare';
import { MemoryStore, createKeyedSerializer } from 'keyturn';

import { worker } from '../runtimes/workerd.mjs';
import { until } from './support.mjs';

const WARNING = 'orders each key within one isolate only';

/** Miniflare running the scope worker, its console output gathered in `output.text`. */
function scopeWorker(flags) {
  const output = { text: '' };
  const gather = (stream) => stream.on('data', (chunk) => (output.text += chunk));
  const mf = new Miniflare({
    ...worker('tests/workerd/scope-worker.mjs'),
    compatibilityFlags: flags,
    cf: false,
    durableObjects: { LOCKS: { className: 'LockDurableObject', useSQLite: true } },
    handleRuntimeStdio(stdout, stderr) {
      gather(stdout);
      gather(stderr);
    },
  });
  return { mf, output };
}

const warnings = (text) => text.split(WARNING).length - 1;

for (const flags of [[], ['nodejs_compat']]) {
  describe(`in workerd${flags.length ? ' with nodejs_compat' : ''}`, () => {
    let mf;
    let output;
    before(async () => {
      ({ mf, output } = scopeWorker(flags));
      await mf.ready;
    });
    after(() => mf?.dispose());

    const get = async (path) => (await mf.dispatchFetch(`http://worker${path}`)).json();
    let marks = 0;
    /** Every line the worker logged before now has arrived. */
    const settled = async () => {
      const mark = `mark-${++marks}`;
      await mf.dispatchFetch(`http://worker/mark?text=${mark}`);
      assert.ok(await until(() => output.text.includes(mark), 10_000), `the worker's line ${mark} never arrived`);
    };

    test('a serializer with scope: isolate, or with a store, says nothing; one without either says so once, on its first call', async () => {
      assert.deepEqual(await get('/isolate'), [1, 2]);
      assert.deepEqual(await get('/store'), [1, 2]);
      await settled();
      assert.equal(warnings(output.text), 0, output.text);
      assert.deepEqual(await Promise.all([get('/plain'), get('/plain'), get('/plain')]), [[1, 2], [1, 2], [1, 2]]);
      await settled();
      assert.equal(warnings(output.text), 1, output.text);
      assert.match(output.text, /Pass a store.*new DurableObjectStore\(env\.LOCKS\).*scope: 'isolate'/);
    });

    test(flags.length ? 'tracing publishes each turn and store call' : 'tracing is not there, and nothing broke', async () => {
      const traced = await get('/trace');
      if (flags.length === 0) return assert.deepEqual(traced, { available: false });
      assert.equal(traced.available, true);
      const byChannel = (name) => traced.seen.filter(({ channel }) => channel === name);
      const [wait] = byChannel('keyturn:turn:wait');
      const [start] = byChannel('keyturn:turn:start');
      const [end] = byChannel('keyturn:turn:end');
      assert.equal(wait.key, 'traced');
      assert.deepEqual([start.id, start.key, start.slot, start.fence], [wait.id, 'traced', 0, traced.fence]);
      assert.ok(start.waitedMs >= 0);
      assert.deepEqual([end.id, end.fence, end.ok], [wait.id, traced.fence, true]);
      assert.ok(end.heldMs >= 0);
      const calls = byChannel('keyturn:store');
      assert.ok(calls.length >= 1, JSON.stringify(traced.seen));
      assert.deepEqual([calls[0].method, calls[0].key, calls[0].outcome], ['create', 'keyturn:serialize:traced', 'written']);
      assert.ok(calls[0].ms >= 0);
    });
  });
}

test('on Node a serializer without a store says nothing: one process is one isolate', async () => {
  const warn = console.warn;
  const said = [];
  console.warn = (...args) => said.push(args.join(' '));
  try {
    const serialize = createKeyedSerializer();
    assert.deepEqual([await serialize('k', () => 1), await serialize('k', () => 2)], [1, 2]);
  } finally {
    console.warn = warn;
  }
  assert.deepEqual(said, []);
});

test("scope: 'isolate' is the one value; with a store it is a TypeError", () => {
  assert.equal(typeof createKeyedSerializer({ scope: 'isolate' }), 'function');
  for (const scope of ['process', '', 'Isolate', 1, null, true]) {
    assert.throws(() => createKeyedSerializer({ scope }), (error) => error instanceof RangeError && /options\.scope must be 'isolate' or undefined/.test(error.message), String(scope));
  }
  assert.throws(() => createKeyedSerializer({ scope: 'isolate', store: new MemoryStore() }), (error) => error instanceof TypeError && /scope: 'isolate'.*a store/.test(error.message));
});
