// The package's browser entry (`browser.js`: top-level await, wasm fetched beside it) loaded by
// headless Chromium from a loopback server, the way a page or a bundle loads it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { readFile, mkdtemp, rm } from 'node:fs/promises';
import { spawn, spawnSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join, extname, normalize } from 'node:path';
import { fileURLToPath } from 'node:url';

const pkg = fileURLToPath(new URL('../../pkg/', import.meta.url));
const chromium = ['chromium', 'chromium-browser', 'google-chrome'].find((name) => spawnSync('which', [name]).status === 0);

const page = `<!doctype html><meta charset="utf-8"><body><pre id="out">running</pre><script type="module">
  const out = document.getElementById('out');
  try {
    const { createKeyedSerializer, SerializedWorkTimeout, DEFAULT_TIMEOUT_MS, acquireLock, MemoryStore } = await import('/pkg/browser.js');
    const store = new MemoryStore();
    const first = await acquireLock(store, 'board');
    const busy = await acquireLock(store, 'board', { waitMs: 10 });
    await first.release();
    const second = await acquireLock(store, 'board');
    const lockOk = first.fence === 1 && busy === undefined && second.fence === 2 && /^[0-9a-f]{32}$/.test(second.token);
    const serialize = createKeyedSerializer({ timeoutMs: 30 });
    const log = [];
    const a = serialize('k', async (signal) => { log.push('a'); await new Promise((r) => setTimeout(r, 5)); return signal instanceof AbortSignal; });
    const b = serialize('k', () => { log.push('b'); return 'b'; });
    const slow = serialize('k', () => new Promise(() => {})).catch((e) => e);
    const results = [await a, await b];
    const timeout = await slow;
    const ok = results[0] === true && results[1] === 'b' && log.join() === 'a,b'
      && timeout instanceof SerializedWorkTimeout && timeout.key === 'k' && DEFAULT_TIMEOUT_MS === 30000
      && serialize.pending() === 0 && lockOk;
    out.textContent = ok ? 'PASS' : 'FAIL ' + JSON.stringify({ results, log, timeout: String(timeout) });
  } catch (error) {
    out.textContent = 'FAIL ' + error;
  }
</script>`;

const types = { '.js': 'text/javascript', '.wasm': 'application/wasm', '.html': 'text/html' };

test('the browser entry loads, serializes and locks in headless Chromium', { skip: !chromium && 'no chromium' }, async () => {
  const server = createServer(async (request, response) => {
    const url = new URL(request.url, 'http://127.0.0.1');
    if (url.pathname === '/') {
      response.writeHead(200, { 'content-type': 'text/html' }).end(page);
      return;
    }
    const path = normalize(url.pathname).replace(/^\/pkg\//, '');
    try {
      const body = await readFile(join(pkg, path));
      response.writeHead(200, { 'content-type': types[extname(path)] ?? 'application/octet-stream' }).end(body);
    } catch {
      response.writeHead(404).end();
    }
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const profile = await mkdtemp(join(tmpdir(), 'keyturn-chromium-'));
  try {
    const { port } = server.address();
    const browser = spawn(chromium, [
      '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
      `--user-data-dir=${profile}`, '--virtual-time-budget=10000', '--dump-dom', `http://127.0.0.1:${port}/`,
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
