// A real Next.js app on the installed tarball: examples/nextjs, built by `next build` and served
// by `next start` on a loopback port — on Next 16 with Turbopack, and the same app on Next 15 with
// webpack (examples/nextjs-webpack, which the test fills with the app's files). In each, the edge
// route (the package's edge-light entry) and the Node route (its Node entry, bundled, with no
// `serverExternalPackages`) answer 100 concurrent increments of one key, 100 of 100 exactly.
// Every Edge Runtime context of both commands refuses to compile wasm from bytes, as Vercel's Edge
// runtime does (tests/runtimes/edge-no-wasm-codegen.cjs). Each example's dependencies are
// installed from its lockfile when they are missing (node_modules inside it, gitignored).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { installTarball, root } from './installed.mjs';
import { until } from './support.mjs';
import { freePort } from '../runtimes/ports.mjs';

const example = join(root, 'examples/nextjs');
const apps = [
  { name: 'Next 16 (Turbopack)', dir: example },
  { name: 'Next 15 (webpack)', dir: join(root, 'examples/nextjs-webpack'), appFiles: ['app', 'lib', 'next.config.mjs'] },
];
const preload = join(root, 'tests/runtimes/edge-no-wasm-codegen.cjs');
const work = mkdtempSync(join(tmpdir(), 'keyturn-nextjs-'));
const servers = new Set();
let keyturn;
let tarball;

before(() => {
  let packed;
  ({ installed: keyturn, packed } = installTarball(work));
  tarball = join(work, packed.filename);
});

after(() => {
  for (const server of servers) server.kill('SIGKILL');
  rmSync(work, { recursive: true, force: true });
});

const readJson = (path) => JSON.parse(readFileSync(path, 'utf8'));

/** Whether `dir`'s node_modules hold every dependency at the version its package.json pins
 * (keyturn aside: the tarball's is copied in). */
function installedAsPinned(dir) {
  return Object.entries(readJson(join(dir, 'package.json')).dependencies).every(([name, version]) => {
    if (name === 'keyturn') return true;
    try {
      return readJson(join(dir, 'node_modules', name, 'package.json')).version === version;
    } catch {
      return false;
    }
  });
}

/** The app in `dir`, ready to build: its dependencies, the app's files, and the tarball's keyturn. */
function prepare({ dir, appFiles = [] }) {
  // Its lockfile's versions, and keyturn from the tarball (its package.json names the release a
  // user installs); nothing written back.
  if (!installedAsPinned(dir)) execFileSync('npm', ['install', '--no-save', '--no-audit', '--no-fund', '--ignore-scripts', tarball], { cwd: dir, stdio: 'pipe' });
  assert.ok(installedAsPinned(dir), `${dir}: dependencies as pinned`);
  for (const file of appFiles) {
    rmSync(join(dir, file), { recursive: true, force: true });
    cpSync(join(example, file), join(dir, file), { recursive: true });
  }
  rmSync(join(dir, 'node_modules/keyturn'), { recursive: true, force: true });
  cpSync(keyturn, join(dir, 'node_modules/keyturn'), { recursive: true });
  rmSync(join(dir, '.next'), { recursive: true, force: true });
}

// What Next and the preload are told; the test runner's own variables stay out.
function env() {
  const { NODE_TEST_CONTEXT, NODE_OPTIONS, ...rest } = process.env;
  return { ...rest, NEXT_TELEMETRY_DISABLED: '1', NODE_OPTIONS: `--require=${preload}` };
}

const next = (dir) => join(dir, 'node_modules/next/dist/bin/next');

/** The preload's lines: what compiling wasm from bytes did in each Edge Runtime context. */
const probes = (log) => [...log.matchAll(/^edge context: wasm from bytes: (.*)$/gm)].map(([, said]) => said);

async function increments(base, route, key) {
  return Promise.all(Array.from({ length: 100 }, async () => {
    const response = await fetch(`${base}/api/${route}/${key}`, { method: 'POST' });
    assert.equal(response.status, 200, await response.clone().text());
    return response.json();
  }));
}

for (const app of apps) {
  test(`${app.name}: next build, next start; the edge and the Node route each count 100 concurrent increments, 100 of 100`, async (t) => {
    prepare(app);
    const started = performance.now();
    let built;
    try {
      built = execFileSync(process.execPath, [next(app.dir), 'build'], { cwd: app.dir, env: env(), encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 540_000 });
    } catch (error) {
      assert.fail(`next build failed:\n${error.stdout}\n${error.stderr}`);
    }
    const buildMs = performance.now() - started;
    assert.equal(readJson(join(app.dir, 'node_modules/next/package.json')).version, readJson(join(app.dir, 'package.json')).dependencies.next);
    // The edge route's two wasm modules are bindings the sandbox compiles, as on Vercel: the
    // edge-light entry's `.wasm?module` imports.
    const manifest = readJson(join(app.dir, '.next/server/middleware-manifest.json'));
    const bindings = new Set(manifest.functions['/api/edge/[key]/route'].wasm.map((binding) => binding.name));
    assert.equal(bindings.size, 2, JSON.stringify(manifest.functions));

    const port = await freePort();
    const server = spawn(process.execPath, [next(app.dir), 'start', '-H', '127.0.0.1', '-p', String(port)], { cwd: app.dir, env: env(), stdio: ['ignore', 'pipe', 'pipe'] });
    servers.add(server);
    let log = '';
    server.stdout.on('data', (chunk) => (log += chunk));
    server.stderr.on('data', (chunk) => (log += chunk));
    const base = `http://127.0.0.1:${port}`;
    try {
      assert.ok(await until(() => fetch(base).then(() => true, () => false), 120_000), `next start answered:\n${log}`);
      for (const route of ['edge', 'node']) {
        const answers = await increments(base, route, `counter-${route}`);
        assert.deepEqual(answers.map((answer) => answer.count).sort((a, b) => a - b), Array.from({ length: 100 }, (_, i) => i + 1), `${route}: every increment counted once`);
        assert.ok(answers.every((answer) => answer.runtime === (route === 'edge' ? 'edge' : 'nodejs')), `${route}: ran in its runtime`);
      }
      // The refusal held in the contexts the edge route ran in, while it was built and served.
      const said = [...probes(built), ...probes(log)];
      assert.ok(probes(log).length > 0 && said.every((probe) => /disallowed/i.test(probe)), `the preload's probes: ${JSON.stringify(said)}\n${log}`);
      assert.doesNotMatch(built + log, /Dynamic WASM code generation|TypeError: fetch failed/);
      t.diagnostic(`next build took ${Math.round(buildMs)} ms; the preload's probes: ${said.length}`);
    } finally {
      server.kill('SIGTERM');
      await until(() => server.exitCode !== null || server.signalCode !== null, 10_000);
      servers.delete(server);
    }
  });
}
