// Four bundlers build a small page from the installed tarball — Vite, webpack 5, esbuild and
// Rollup, each with the smallest config docs/platforms.md describes for it — and each page runs in headless
// Chromium and headless Firefox through WebDriver, reporting every check by name.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { allPassed, checks, installTarball, root } from './installed.mjs';
import { browsers, pageSays, serveFiles } from '../runtimes/webdriver.mjs';

const bin = (name) => join(root, 'node_modules/.bin', name);
const work = mkdtempSync(join(tmpdir(), 'keyturn-bundlers-'));
let project;
let server;

const page = (script) => `<!doctype html><meta charset="utf-8"><pre id="out">running</pre>${script}`;

/** The wasm files beside a bundle, for bundlers that leave `new URL(…, import.meta.url)` alone. */
function copyWasm(dist) {
  const from = join(project, 'node_modules/keyturn');
  for (const file of readdirSync(from).filter((name) => name.endsWith('.wasm'))) copyFileSync(join(from, file), join(dist, file));
}

// Each bundler: its config (as docs/platforms.md describes it), and how to build `dist-<name>/` with an index.html.
const bundlers = {
  vite() {
    writeFileSync(join(project, 'index.html'), page('<script type="module" src="/src/main.js"></script>'));
    // `--base ./`: the page is served from a subdirectory here.
    execFileSync(bin('vite'), ['build', '--base', './', '--outDir', 'dist-vite', '--logLevel', 'warn'], { cwd: project, stdio: 'pipe' });
  },
  webpack() {
    writeFileSync(join(project, 'webpack.config.cjs'), `module.exports = {
  mode: 'production',
  entry: './src/main.js',
  output: { path: require('node:path').join(__dirname, 'dist-webpack'), filename: 'main.js' },
};
`);
    execFileSync(bin('webpack'), ['--config', 'webpack.config.cjs'], { cwd: project, stdio: 'pipe' });
    writeFileSync(join(project, 'dist-webpack/index.html'), page('<script src="main.js"></script>'));
  },
  esbuild() {
    const dist = join(project, 'dist-esbuild');
    execFileSync(bin('esbuild'), ['src/main.js', '--bundle', '--format=esm', '--platform=browser', `--outfile=${join(dist, 'main.js')}`, '--log-level=warning'], { cwd: project, stdio: 'pipe' });
    copyWasm(dist);
    writeFileSync(join(dist, 'index.html'), page('<script type="module" src="main.js"></script>'));
  },
  rollup() {
    writeFileSync(join(project, 'rollup.config.mjs'), `import { nodeResolve } from '@rollup/plugin-node-resolve';
export default { input: 'src/main.js', output: { dir: 'dist-rollup', format: 'es' }, plugins: [nodeResolve({ browser: true })] };
`);
    // The config imports the plugin from the consumer's node_modules, as a user's would: here a
    // link to this repository's copy (its own dependencies resolve from there).
    mkdirSync(join(project, 'node_modules/@rollup'), { recursive: true });
    symlinkSync(join(root, 'node_modules/@rollup/plugin-node-resolve'), join(project, 'node_modules/@rollup/plugin-node-resolve'));
    execFileSync(bin('rollup'), ['--config', 'rollup.config.mjs', '--silent'], { cwd: project, stdio: 'pipe' });
    copyWasm(join(project, 'dist-rollup'));
    writeFileSync(join(project, 'dist-rollup/index.html'), page('<script type="module" src="main.js"></script>'));
  },
};

before(async () => {
  ({ project } = installTarball(work));
  mkdirSync(join(project, 'src'));
  writeFileSync(join(project, 'src/main.js'), `import * as k from 'keyturn';
${checks}
const out = document.getElementById('out');
try {
  out.textContent = JSON.stringify(await checks(k));
} catch (error) {
  out.textContent = JSON.stringify({ error: String(error) });
}
`);
  server = await serveFiles(project);
});

after(() => {
  server?.close();
  rmSync(work, { recursive: true, force: true });
});

const drivable = browsers();

for (const [name, build] of Object.entries(bundlers)) {
  test(`${name} builds a page from the installed tarball that passes every check in ${drivable.map((b) => b.name).join(' and ') || 'no browser'}`, { skip: drivable.length === 0 && 'no browser to drive' }, async () => {
    build();
    for (const browser of drivable) {
      const said = await pageSays(browser, `${server.url}dist-${name}/`);
      let results;
      try {
        results = JSON.parse(said);
      } catch {
        results = { said };
      }
      assert.ok(allPassed(results), `${name} in ${browser.name}: ${said}`);
    }
  });
}
