// The package's README and docs pages, followed as a user would: a fresh project installs the
// packed tarball, reads node_modules/keyturn/README.md and docs/*.md, and runs their code blocks
// as written — the Node examples in Node, the Redis one against a redis-server this test starts,
// the worker built by wrangler from the README's wrangler.toml and run as two isolates by
// docs/platforms.md's Miniflare script (100 notifications at once, an exact count), the page
// bundled and opened in headless Chromium; a `js fragment` (a function over bindings) is parsed
// by Node. The Deno blocks run in deno.test.mjs, the `js lambda` ones in examples.test.mjs, the
// `js otel` one in tracing.test.mjs, and the `js sqlite`, `js dynamodb` and `js postgres` blocks
// in their stores' tests, against their engines. Each `console.log(…); // what` must print what
// its comment says.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { installTarball, root } from './installed.mjs';
import { haveRedisServer, startRedisServer } from '../runtimes/redis-server.mjs';
import { browsers, pageSays, serveFiles } from '../runtimes/webdriver.mjs';

const bin = (name) => join(root, 'node_modules/.bin', name);
const work = mkdtempSync(join(tmpdir(), 'keyturn-readme-'));
let project;
let blocks;
let pages; // file → text, as installed: README.md and docs/*.md

/** A page's fenced code blocks: `{ lang, tag, code, file }`. */
function codeBlocks(markdown, file) {
  return [...markdown.matchAll(/^```(\w+)(?:[ ,](\S+))?\n([\s\S]*?)^```$/gm)].map(([, lang, tag, code]) => ({ lang, tag, code, file }));
}

// Every kind of block some test runs (`js sqlite`, `dynamodb`, `postgres`: the stores' tests).
const RUN = ['js', 'js redis', 'js worker', 'js miniflare', 'js deno', 'ts deno', 'js lambda', 'js otel', 'js browser', 'js fragment', 'js sqlite', 'js dynamodb', 'js postgres', 'toml', 'rust ignore', 'sh'];

const blocksOf = (lang, tag) => blocks.filter((block) => block.lang === lang && block.tag === tag);

/** What the block's `console.log(…); // what` lines say they print, in order. */
const promised = (code) => [...code.matchAll(/console\.log\(.*\); \/\/ (.*)$/gm)].map(([, said]) => said);

/** Each printed line is what its comment says, up to the comment's own explanation. */
function printsAsPromised(stdout, code) {
  const lines = stdout.trim().split('\n');
  const said = promised(code);
  assert.equal(lines.length, said.length, `printed ${JSON.stringify(lines)}, promised ${JSON.stringify(said)}`);
  lines.forEach((line, i) => assert.ok(said[i].startsWith(line), `printed ${JSON.stringify(line)}, the README says ${JSON.stringify(said[i])}`));
}

function run(command, args, options = {}) {
  const result = spawnSync(command, args, { cwd: project, encoding: 'utf8', timeout: 120000, ...options });
  assert.equal(result.status, 0, `${command} ${args.join(' ')}: ${result.stderr}`);
  return result.stdout;
}

before(() => {
  ({ project } = installTarball(work));
  // The tools the README's examples use beside the package, as a user would install them.
  for (const tool of ['miniflare', 'redis']) symlinkSync(join(root, 'node_modules', tool), join(project, 'node_modules', tool));
  const installed = join(project, 'node_modules/keyturn');
  pages = new Map([['README.md', readFileSync(join(installed, 'README.md'), 'utf8')]]);
  for (const page of readdirSync(join(installed, 'docs')).filter((name) => name.endsWith('.md'))) pages.set(`docs/${page}`, readFileSync(join(installed, 'docs', page), 'utf8'));
  blocks = [...pages].flatMap(([file, text]) => codeBlocks(text, file));
});

after(() => rmSync(work, { recursive: true, force: true }));

test('the README and docs name nothing only the repository has, and every page the README links is packed', () => {
  assert.ok(pages.size > 5, `${[...pages.keys()]}`);
  for (const [file, text] of pages) assert.doesNotMatch(text, /make (dev|test|bench)|tests\/README|bench\/README|design\.md|contributing\.md|repository-only/, file);
  for (const [, page] of pages.get('README.md').matchAll(/\]\((docs\/[\w-]+\.md)\)/g)) {
    assert.ok(pages.has(page), `the README links ${page}, not packed`);
  }
});

test('every code block is of a kind some test runs', () => {
  for (const { lang, tag, file } of blocks) assert.ok(RUN.includes(tag ? `${lang} ${tag}` : lang), `${file}: \`\`\`${lang} ${tag ?? ''}`);
});

test('each fragment parses as a module', () => {
  const fragments = blocksOf('js', 'fragment');
  assert.ok(fragments.length >= 3, `${fragments.length} fragments`);
  for (const [i, { code }] of fragments.entries()) {
    writeFileSync(join(project, `fragment-${i}.mjs`), code);
    run(process.execPath, ['--check', `fragment-${i}.mjs`]);
  }
});

test('every Node example runs as written and prints what it says', () => {
  const examples = blocksOf('js', undefined);
  assert.ok(examples.length >= 4, `${examples.length} Node examples`);
  for (const [i, { code }] of examples.entries()) {
    writeFileSync(join(project, `example-${i}.mjs`), code);
    printsAsPromised(run(process.execPath, [`example-${i}.mjs`]), code);
  }
});

const haveRedis = haveRedisServer();

test('the Redis examples, against a redis-server of their own', { skip: !haveRedis && 'no redis-server' }, async () => {
  const examples = blocksOf('js', 'redis');
  assert.ok(examples.length >= 2, 'the quick start\'s and the store\'s');
  const { port, stop } = await startRedisServer();
  try {
    for (const [i, { code }] of examples.entries()) {
      writeFileSync(join(project, `redis-example-${i}.mjs`), code);
      printsAsPromised(run(process.execPath, [`redis-example-${i}.mjs`], { env: { ...process.env, REDIS_URL: `redis://127.0.0.1:${port}` } }), code);
    }
  } finally {
    stop(); // by PID: only the server this test started
  }
});

test('the Worker: wrangler.toml and src/index.js as written, two isolates in Miniflare, 100 notifications at once counted exactly', () => {
  const [toml] = blocksOf('toml', undefined);
  const [worker] = blocksOf('js', 'worker');
  const [twoIsolates] = blocksOf('js', 'miniflare');
  writeFileSync(join(project, 'wrangler.toml'), toml.code);
  mkdirSync(join(project, 'src'), { recursive: true });
  writeFileSync(join(project, 'src/index.js'), worker.code);
  run(bin('wrangler'), ['deploy', '--dry-run', '--outdir', 'dist'], {
    env: { ...process.env, WRANGLER_SEND_METRICS: 'false', WRANGLER_SEND_ERROR_REPORTS: 'false', CLOUDFLARE_CF_FETCH_ENABLED: 'false' },
  });
  assert.ok(readdirSync(join(project, 'dist')).some((file) => file.endsWith('.wasm')), 'wrangler bundled the wasm');
  writeFileSync(join(project, 'two-isolates.mjs'), twoIsolates.code);
  const printed = run(process.execPath, ['two-isolates.mjs']);
  printsAsPromised(printed, twoIsolates.code);
  assert.equal(printed.trim(), '100');
});

// The Deno example: tests/js/deno.test.mjs checks and runs every Deno snippet.

const chromium = browsers().find((browser) => browser.name === 'chromium');

test('the page: bundled by esbuild with the wasm copied beside it, in headless Chromium', { skip: !chromium && 'no chromium and chromedriver' }, async () => {
  const [{ code }] = blocksOf('js', 'browser');
  const site = join(project, 'site');
  mkdirSync(site, { recursive: true });
  writeFileSync(join(project, 'page.js'), code);
  run(bin('esbuild'), ['page.js', '--bundle', '--format=esm', '--platform=browser', '--outfile=site/page.js', '--log-level=warning']);
  for (const file of readdirSync(join(project, 'node_modules/keyturn')).filter((name) => name.endsWith('.wasm'))) {
    copyFileSync(join(project, 'node_modules/keyturn', file), join(site, file));
  }
  // The page's body is the `#out` pageSays reads, "running" until the example writes to it.
  const server = await serveFiles(site, '<!doctype html><meta charset="utf-8"><body id="out">running</body><script type="module" src="/page.js"></script>');
  try {
    assert.equal(await pageSays(chromium, server.url), code.match(/textContent = .*; \/\/ (.*)$/m)[1]);
  } finally {
    server.close();
  }
});

test('a Worker may make its serializer at module scope through cloudflare:workers, as the docs say', async () => {
  const line = pages.get('docs/platforms.md').match(/`(const serialize = createKeyedSerializer\(\{ store: new DurableObjectStore\(env\.LOCKS\) \}\))`/)[1];
  const dir = join(project, 'module-scope');
  mkdirSync(join(dir, 'src'), { recursive: true });
  writeFileSync(join(dir, 'wrangler.toml'), blocksOf('toml', undefined)[0].code);
  writeFileSync(
    join(dir, 'src/index.js'),
    `import { env } from 'cloudflare:workers';\nimport { createKeyedSerializer, DurableObjectStore } from 'keyturn';\nexport { LockDurableObject } from 'keyturn';\n${line};\nexport default { async fetch() { const from = Date.now(); return Response.json(await serialize('k', async (signal, turn) => turn.fence >= from * 1000)); } };\n`,
  );
  execFileSync(bin('wrangler'), ['deploy', '--dry-run', '--outdir', 'dist'], {
    cwd: dir,
    env: { ...process.env, WRANGLER_SEND_METRICS: 'false', WRANGLER_SEND_ERROR_REPORTS: 'false', CLOUDFLARE_CF_FETCH_ENABLED: 'false' },
    stdio: 'pipe',
  });
  const { Miniflare } = await import(join(root, 'node_modules/miniflare/dist/src/index.js'));
  const mf = new Miniflare({
    modules: true,
    modulesRoot: join(dir, 'dist'),
    scriptPath: join(dir, 'dist/index.js'),
    modulesRules: [{ type: 'CompiledWasm', include: ['**/*.wasm'] }],
    compatibilityDate: '2025-09-01',
    cf: false,
    durableObjects: { LOCKS: { className: 'LockDurableObject', useSQLite: true } },
  });
  try {
    assert.equal(await (await mf.dispatchFetch('http://worker/')).json(), true, 'a turn over the Durable Object, fenced');
  } finally {
    await mf.dispose();
  }
});
