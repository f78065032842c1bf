// The package's browser entry (`browser.js`: top-level await, wasm fetched beside it) loaded by
// headless Chromium from a loopback server, the way a page or a bundle loads it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { spawn, spawnSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { serveFiles } from '../runtimes/webdriver.mjs';

// The page loads the package from /pkg/, as served from the repository's root.
const root = fileURLToPath(new URL('../..', import.meta.url));
const chromium = ['chromium', 'chromium-browser', 'google-chrome'].find((name) => spawnSync('which', [name]).status === 0);

const page = `<!doctype html><meta charset="utf-8"><body><pre id="out">running</pre><script type="module">
  const out = document.getElementById('out');
  try {
    const { createKeyedSerializer, SerializedWorkTimeout, DEFAULT_TIMEOUT_MS, acquireLock, MemoryStore } = await import('/pkg/browser.js');
    const store = new MemoryStore();
    const clockFence = Math.floor(Date.now()) * 1000; // the least fence by the clock rule
    const first = await acquireLock(store, 'board');
    const busy = await acquireLock(store, 'board', { waitMs: 10 });
    await first.release();
    const second = await acquireLock(store, 'board');
    const lockOk = first.fence >= clockFence && busy === undefined && second.fence > first.fence && /^[0-9a-f]{32}$/.test(second.token);
    const serialize = createKeyedSerializer({ timeoutMs: 30 });
    const log = [];
    const a = serialize('k', async (signal) => { log.push('a'); await new Promise((r) => setTimeout(r, 5)); return signal instanceof AbortSignal; });
    const b = serialize('k', () => { log.push('b'); return 'b'; });
    const slow = serialize('k', () => new Promise(() => {})).catch((e) => e);
    const results = [await a, await b];
    const timeout = await slow;
    // The controls: a caller's signal (waiting and running), a bound per key, keyed-serializer.js's order.
    const { SerializedQueueFull, KeyturnInstanceFailed } = await import('/pkg/browser.js');
    const bounded = createKeyedSerializer({ maxPending: 2 });
    const controls = [];
    let release;
    const gate = new Promise((r) => (release = r));
    const running = new AbortController();
    const waiting = new AbortController();
    let workSignal;
    const held = bounded('c', (signal) => { workSignal = signal; controls.push('held'); return gate; }, { signal: running.signal });
    const cancelled = bounded('c', () => controls.push('never'), { signal: waiting.signal });
    const refused = await bounded('c', () => controls.push('never')).catch((e) => e);
    waiting.abort('left');
    const left = await cancelled.catch((e) => e);
    await new Promise((r) => setTimeout(r, 1));
    held.then(() => {}, () => controls.push('handler'));
    const after = bounded('c', () => controls.push('after'));
    running.abort('gone');
    const gone = await held.catch((e) => e);
    await after;
    const idleBeforeTrap = serialize.pending() === 0;
    const controlsOk = refused instanceof SerializedQueueFull && refused.maxPending === 2 && left === 'left' && gone === 'gone'
      && workSignal.reason === 'gone' && controls.join() === 'held,handler,after' && bounded.stats().aborted === 2;
    release();
    // A trap in the instance: a clear error, then a fresh instance for a new serializer.
    const busyKey = serialize('t', () => new Promise((r) => setTimeout(r, 5)));
    await new Promise((r) => setTimeout(r, 1)); // running: it finishes despite the trap
    const { Engine } = await import('/pkg/keyturn_wasm.js');
    const original = Engine.prototype.enter;
    Engine.prototype.enter = function (...args) {
      Engine.prototype.enter = original;
      this.__wbg_ptr = 0xfffffff0;
      return original.apply(this, args);
    };
    const trapped = await serialize('t', () => 1).catch((e) => e);
    await busyKey;
    const fresh = createKeyedSerializer();
    const trapOk = trapped instanceof KeyturnInstanceFailed && (await fresh('t', async () => 'fresh')) === 'fresh';
    const ok = results[0] === true && results[1] === 'b' && log.join() === 'a,b'
      && timeout instanceof SerializedWorkTimeout && timeout.key === 'k' && DEFAULT_TIMEOUT_MS === 30000
      && idleBeforeTrap && lockOk && controlsOk && trapOk;
    out.textContent = ok ? 'PASS' : 'FAIL ' + JSON.stringify({ results, log, timeout: String(timeout), controls, controlsOk, trapOk, trapped: String(trapped) });
  } catch (error) {
    out.textContent = 'FAIL ' + error;
  }
</script>`;

test('the browser entry loads, serializes (with its controls, and a fresh instance after a trap) and locks in headless Chromium', { skip: !chromium && 'no chromium' }, async () => {
  const server = await serveFiles(root, page);
  const profile = await mkdtemp(join(tmpdir(), 'keyturn-chromium-'));
  try {
    const browser = spawn(chromium, [
      '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
      `--user-data-dir=${profile}`, '--virtual-time-budget=10000', '--dump-dom', server.url,
    ]);
    let dom = '';
    browser.stdout.on('data', (chunk) => (dom += chunk));
    const code = await new Promise((resolve) => browser.on('close', resolve));
    const result = /<pre id="out">([^<]*)<\/pre>/.exec(dom)?.[1];
    assert.equal(result, 'PASS', `chromium exited ${code}; page said: ${result ?? dom.slice(0, 500)}`);
  } finally {
    server.close();
    await rm(profile, { recursive: true, force: true });
  }
});
