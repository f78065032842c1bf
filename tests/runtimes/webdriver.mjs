// A page in headless Chromium or Firefox, driven through WebDriver (chromedriver, geckodriver —
// what scripts/setup.sh installs): open a URL, wait until the page's #out says something other
// than "running", answer that text; and the loopback server that serves such pages. Used by
// the packaging and bundler tests and the cold-start benchmark.
import { spawn, spawnSync } from 'node:child_process';
import { createServer as createHttpServer } from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { extname, join, normalize } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

import { freePort } from './ports.mjs';

const types = { '.js': 'text/javascript', '.mjs': 'text/javascript', '.wasm': 'application/wasm', '.html': 'text/html' };

/**
 * Serves the files under `dir` on a loopback port — a path ending in `/` as its index.html —
 * with `page` (HTML) at `/` when given: `{ url, close }`.
 */
export async function serveFiles(dir, page) {
  const server = createHttpServer(async (request, response) => {
    let path = normalize(new URL(request.url, 'http://127.0.0.1').pathname);
    if (path === '/' && page !== undefined) return response.writeHead(200, { 'content-type': 'text/html' }).end(page);
    if (path.endsWith('/')) path += 'index.html';
    try {
      const body = await readFile(join(dir, path));
      response.writeHead(200, { 'content-type': types[extname(path)] ?? 'application/octet-stream' }).end(body);
    } catch {
      response.writeHead(404).end();
    }
  });
  await new Promise((ready) => server.listen(0, '127.0.0.1', ready));
  return { url: `http://127.0.0.1:${server.address().port}/`, close: () => server.close() };
}

const which = (names) => names.find((name) => spawnSync('which', [name]).status === 0);

/** The browsers this machine can drive: `{ name, driver, binary }`. */
export function browsers() {
  const found = [];
  const chromedriver = which(['chromedriver']);
  const chromium = which(['chromium', 'chromium-browser', 'google-chrome']);
  if (chromedriver && chromium) found.push({ name: 'chromium', driver: chromedriver, binary: spawnSync('which', [chromium]).stdout.toString().trim() });
  const geckodriver = which(['geckodriver']);
  const firefox = which(['firefox-esr', 'firefox']);
  if (geckodriver && firefox) found.push({ name: 'firefox', driver: geckodriver, binary: spawnSync('which', [firefox]).stdout.toString().trim() });
  return found;
}

async function call(base, method, path, body) {
  const response = await fetch(`${base}${path}`, { method, headers: { 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
  const answer = await response.json();
  if (!response.ok) throw new Error(`webdriver ${method} ${path}: ${JSON.stringify(answer.value ?? answer)}`);
  return answer.value;
}

function capabilities(browser, profile) {
  if (browser.name === 'chromium') {
    return {
      browserName: 'chrome',
      'goog:chromeOptions': {
        binary: browser.binary,
        args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync', `--user-data-dir=${profile}`],
      },
    };
  }
  return { browserName: 'firefox', 'moz:firefoxOptions': { binary: browser.binary, args: ['-headless', '-profile', profile] } };
}

/**
 * Opens `url` in a fresh headless `browser` and answers `#out`'s text once it is no longer
 * "running" (or `timeoutMs` passed). One driver process and one browser profile per call.
 */
export async function pageSays(browser, url, { timeoutMs = 60000 } = {}) {
  const port = await freePort();
  const profile = mkdtempSync(join(tmpdir(), `keyturn-${browser.name}-`));
  const driver = spawn(browser.driver, [`--port=${port}`], { stdio: 'ignore' });
  const base = `http://127.0.0.1:${port}`;
  let session;
  try {
    for (let i = 0; ; i++) {
      try {
        await call(base, 'GET', '/status');
        break;
      } catch (error) {
        if (i > 200) throw error;
        await sleep(50);
      }
    }
    ({ sessionId: session } = await call(base, 'POST', '/session', { capabilities: { alwaysMatch: capabilities(browser, profile) } }));
    await call(base, 'POST', `/session/${session}/url`, { url });
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const text = await call(base, 'POST', `/session/${session}/execute/sync`, { script: "const out = document.getElementById('out'); return out ? out.textContent : 'running';", args: [] });
      if (text !== 'running' && text !== '') return text;
      if (Date.now() > deadline) return `timed out: ${text}`;
      await sleep(20);
    }
  } finally {
    if (session) await call(base, 'DELETE', `/session/${session}`).catch(() => {});
    driver.kill();
    rmSync(profile, { recursive: true, force: true });
  }
}
