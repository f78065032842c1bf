// Cold start: loading the package and the first `serialize` result, in a fresh process or isolate
// each run — Node (the Node entry), Deno (the Deno entry), headless Chromium and Firefox (the
// browser entry from a loopback server, through WebDriver, timed in the page) and workerd (a fresh Miniflare each run: startup
// to first response, beside a worker that imports nothing). keyed-serializer.js (the per-key
// serializer keyturn re-implements) runs beside keyturn where KEYTURN_SEED names it. Median of N runs (default 11).
//
//   node bench/cold-start.mjs [--runs N]
//
// Not a test: it asserts nothing about speed.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

import { Miniflare } from 'miniflare';

import { browsers, pageSays, serveFiles } from '../tests/runtimes/webdriver.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const runs = args.includes('--runs') ? Number(args[args.indexOf('--runs') + 1]) : 11;
const seed = process.env.KEYTURN_SEED ? resolve(process.env.KEYTURN_SEED) : undefined;
const work = mkdtempSync(join(tmpdir(), 'keyturn-cold-'));
const median = (values) => [...values].sort((a, b) => a - b)[values.length >> 1];
const rows = [];

// The measured program: load, then one work's result; prints { load, first } in ms.
const program = (specifier) => `const t0 = performance.now();
const k = await import(${JSON.stringify(specifier)});
const t1 = performance.now();
const create = k.createKeyedSerializer ?? k.default.createKeyedSerializer;
await create()('k', async () => 1);
const t2 = performance.now();
console.log(JSON.stringify({ load: t1 - t0, first: t2 - t1 }));
`;

function sample(label, command, argv, file, specifier) {
  writeFileSync(join(work, file), program(specifier));
  const loads = [];
  const totals = [];
  for (let i = 0; i < runs; i++) {
    const out = execFileSync(command, [...argv, join(work, file)], { cwd: root, encoding: 'utf8', env: { ...process.env, DENO_NO_UPDATE_CHECK: '1', NO_COLOR: '1' } });
    const { load, first } = JSON.parse(out.trim().split('\n').pop());
    loads.push(load);
    totals.push(load + first);
  }
  rows.push([label, median(loads), median(totals)]);
}

try {
  const keyturnNode = join(root, 'pkg/node.mjs');
  const keyturnDeno = join(root, 'pkg/deno.js');
  sample('Node: keyturn', process.execPath, [], 'node-keyturn.mjs', keyturnNode);
  if (seed) sample('Node: seed', process.execPath, [], 'node-seed.mjs', seed);
  const deno = join(root, 'node_modules/.bin/deno');
  sample('Deno: keyturn', deno, ['run', '--quiet', `--allow-read=${root}`], 'deno-keyturn.mjs', keyturnDeno);

  // Browsers: a fresh headless browser (through WebDriver) each run; the page times itself.
  const page = `<!doctype html><pre id="out">running</pre><script type="module">
    const t0 = performance.now();
    const k = await import('/pkg/browser.js');
    const loaded = performance.now();
    await k.createKeyedSerializer()('k', async () => 1);
    document.getElementById('out').textContent = JSON.stringify({ load: loaded - t0, total: performance.now() - t0 });
  </script>`;
  const server = await serveFiles(root, page);
  try {
    for (const browser of browsers()) {
      const loads = [];
      const totals = [];
      for (let i = 0; i < runs; i++) {
        const said = JSON.parse(await pageSays(browser, server.url));
        loads.push(said.load);
        totals.push(said.total);
      }
      rows.push([`${browser.name}: keyturn (browser entry over loopback HTTP)`, median(loads), median(totals)]);
    }
  } finally {
    server.close();
  }

  // workerd: a fresh Miniflare (a new workerd process) per run, startup to first response.
  const worker = (script) => {
    const times = [];
    return (async () => {
      for (let i = 0; i < runs; i++) {
        const started = performance.now();
        const mf = new Miniflare({ modules: true, modulesRoot: root, scriptPath: join(root, script), modulesRules: [{ type: 'ESModule', include: ['**/*.js', '**/*.mjs'] }, { type: 'CompiledWasm', include: ['**/*.wasm'] }], compatibilityDate: '2025-09-01', cf: false });
        await (await mf.dispatchFetch('http://cold/')).text();
        times.push(performance.now() - started);
        await mf.dispose();
      }
      return median(times);
    })();
  };
  writeFileSync(join(root, 'bench/runtimes/.cold-keyturn.mjs'), "import { createKeyedSerializer } from '../../pkg/workerd.js';\nexport default { async fetch() { return new Response(String(await createKeyedSerializer({ scope: 'isolate' })('k', async () => 1))); } };\n");
  writeFileSync(join(root, 'bench/runtimes/.cold-empty.mjs'), "export default { async fetch() { return new Response('1'); } };\n");
  const empty = await worker('bench/runtimes/.cold-empty.mjs');
  const keyturn = await worker('bench/runtimes/.cold-keyturn.mjs');
  rows.push(['workerd: keyturn (startup to first response, beyond an empty worker)', NaN, keyturn - empty]);
} finally {
  rmSync(join(root, 'bench/runtimes/.cold-keyturn.mjs'), { force: true });
  rmSync(join(root, 'bench/runtimes/.cold-empty.mjs'), { force: true });
  rmSync(work, { recursive: true, force: true });
}

console.log(`cold start, node ${process.version}: load, then the first serialize result; median of ${runs} fresh processes or isolates each`);
if (!seed) console.log("(no seed row: set KEYTURN_SEED to the path of keyed-serializer.js to add it)");
console.log('');
console.log('runtime                                                               load ms   load + first result ms');
for (const [label, load, total] of rows) {
  console.log(`${label.padEnd(69)} ${(Number.isNaN(load) ? '—' : load.toFixed(1)).padStart(7)}   ${total.toFixed(1).padStart(22)}`);
}
