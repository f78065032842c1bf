// The `edge-light` entry as Vercel's Edge runtime runs it, from the installed tarball: bundled by
// esbuild as Vercel bundles an edge function (the `edge-light` condition first, a `.wasm?module`
// import a binding the runtime fills with a module it compiled), run by edge-runtime — Vercel's
// own — with wasm code generation refused, as Vercel's Edge runtime refuses it.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';

import { build } from 'esbuild';
import { EdgeRuntime } from 'edge-runtime';

import { allPassed, checks, installTarball } from './installed.mjs';

const work = mkdtempSync(join(tmpdir(), 'keyturn-edge-light-'));
let project;

before(() => {
  ({ project } = installTarball(work));
});

after(() => rmSync(work, { recursive: true, force: true }));

// A counter per key behind a turn per key (a read, a round trip, a write), and the checks every
// entry runs.
const worker = `import * as k from 'keyturn';
${checks}
const serialize = k.createKeyedSerializer({ timeoutMs: 5000 });
const counts = new Map();
const increment = (key) => serialize(key, async () => {
  const count = counts.get(key) ?? 0;
  await new Promise((resolve) => setTimeout(resolve, 2));
  counts.set(key, count + 1);
  return count + 1;
});
addEventListener('fetch', (event) => {
  const { pathname } = new URL(event.request.url);
  event.respondWith(pathname === '/checks'
    ? checks(k).then((results) => Response.json(results))
    : increment(pathname.slice(1)).then((count) => Response.json({ count })));
});
`;

/**
 * Vercel's treatment of `.wasm?module`: the file leaves the bundle, and the import is a global
 * the runtime binds to the module it compiled (in its own realm, outside the isolate's).
 */
function wasmModules(bindings) {
  return {
    name: 'wasm-module',
    setup(bundler) {
      bundler.onResolve({ filter: /\.wasm\?module$/ }, ({ path, resolveDir }) => ({
        path: join(resolveDir, path.replace(/\?module$/, '')),
        namespace: 'wasm-module',
      }));
      bundler.onLoad({ filter: /.*/, namespace: 'wasm-module' }, ({ path }) => {
        const name = `wasm_${bindings.size}`;
        bindings.set(name, path);
        return { contents: `export default globalThis.${name};`, loader: 'js' };
      });
    },
  };
}

async function edgeFunction() {
  writeFileSync(join(project, 'edge.js'), worker);
  const bindings = new Map();
  // A classic script, as edge-runtime evaluates: an entry with top-level await could not be one.
  const result = await build({
    entryPoints: [join(project, 'edge.js')],
    bundle: true,
    write: false,
    format: 'iife',
    platform: 'browser',
    conditions: ['edge-light', 'worker', 'browser'],
    metafile: true,
    logLevel: 'silent',
    plugins: [wasmModules(bindings)],
  });
  const runtime = new EdgeRuntime({
    codeGeneration: { strings: false, wasm: false },
    extend: (context) => {
      for (const [name, path] of bindings) context[name] = new WebAssembly.Module(readFileSync(path));
      return context;
    },
  });
  runtime.evaluate(result.outputFiles[0].text);
  return { runtime, inputs: Object.keys(result.metafile.inputs), bindings };
}

test('edge-light: bundled with the edge-light condition, its wasm bound as compiled modules, nothing fetched', async () => {
  const { inputs, bindings } = await edgeFunction();
  const entries = inputs.filter((path) => /node_modules\/keyturn\/(browser|workerd|deno|edge-light|node)\.m?js$/.test(path));
  assert.deepEqual(entries.map((path) => path.replace(/.*\//, '')), ['edge-light.js']);
  assert.deepEqual([...bindings.values()].map((path) => relative(join(project, 'node_modules/keyturn'), path)).sort(), ['keyturn_lock_bg.wasm', 'keyturn_wasm_bg.wasm']);
});

test('edge-light in edge-runtime with wasm code generation refused: 100 concurrent requests count 100 of 100, and every check', async () => {
  const { runtime } = await edgeFunction();
  // The refusal holds in this isolate: were the entry to compile its wasm, it would fail here.
  const refused = runtime.evaluate(`(() => { try { new WebAssembly.Module(new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0])); return 'compiled'; } catch (error) { return String(error); } })()`);
  assert.match(refused, /disallowed/i);
  const counts = await Promise.all(Array.from({ length: 100 }, async () => {
    const response = await runtime.dispatchFetch('http://edge.test/counter', { method: 'POST' });
    assert.equal(response.status, 200);
    return (await response.json()).count;
  }));
  assert.deepEqual(counts.sort((a, b) => a - b), Array.from({ length: 100 }, (_, i) => i + 1));
  // The lock's module, instantiated on first use from its binding (checks takes a lock).
  const results = await (await runtime.dispatchFetch('http://edge.test/checks')).json();
  assert.ok(allPassed(results), JSON.stringify(results));
});
