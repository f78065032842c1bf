// The package as npm users receive it: `npm pack` of pkg/, installed (the tarball, not a link)
// into a fresh project, and every entry run from there — import, require, Deno, Bun, the browser
// entry in headless Chromium, the workerd entry bundled by wrangler and run by Miniflare — and
// TypeScript consumers compiled against it under the resolutions users configure.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, normalize } from 'node:path';

import { Miniflare } from 'miniflare';

import { allPassed, checks, installTarball, root } from './installed.mjs';
import { browsers, pageSays, serveFiles } from '../runtimes/webdriver.mjs';

const bin = (name) => join(root, 'node_modules/.bin', name);
const work = mkdtempSync(join(tmpdir(), 'keyturn-package-'));
let project;
let installed;
let packed;

before(() => {
  ({ project, installed, packed } = installTarball(work));
});

after(() => rmSync(work, { recursive: true, force: true }));


test('the tarball holds README, both licenses, a changelog, metadata and every file its entries load — nothing from the build tree', () => {
  const files = packed.files.map((file) => file.path).sort();
  for (const file of ['README.md', 'LICENSE-MIT', 'LICENSE-APACHE', 'CHANGELOG.md', 'package.json', 'index.d.ts', 'index.d.cts']) assert.ok(files.includes(file), `${file} is packed`);
  assert.deepEqual(files.filter((file) => file.startsWith('.') || file.includes('/.') || file.endsWith('.src.mjs')), [], 'no build leftovers');
  const manifest = JSON.parse(readFileSync(join(installed, 'package.json'), 'utf8'));
  assert.match(manifest.version, /^\d+\.\d+\.\d+/);
  assert.ok(manifest.keywords.length >= 5);
  assert.equal(manifest.license, 'MIT OR Apache-2.0');
  // Every module a shipped file loads — static and dynamic imports, and `new URL(…, import.meta.url)`
  // assets — is shipped too.
  // A query (`.wasm?module`, the edge-light entry's) is the bundler's, not part of the file's name.
  const specifier = /(?:from\s+|import\(\s*|new URL\(\s*)['"](\.{1,2}\/[^'"?]+)(?:\?[^'"]*)?['"]/g;
  for (const file of files.filter((name) => /\.(m?js|cjs)$/.test(name))) {
    const source = readFileSync(join(installed, file), 'utf8');
    for (const [, relative] of source.matchAll(specifier)) {
      const target = normalize(join(dirname(file), relative));
      assert.ok(files.includes(target), `${file} loads ${relative}, which is not packed`);
    }
  }
  for (const target of Object.values(manifest.exports['.']).flatMap((entry) => Object.values(entry).flatMap((v) => (typeof v === 'string' ? [v] : Object.values(v))))) {
    assert.ok(files.includes(target.replace(/^\.\//, '')), `the exports map names ${target}, which is not packed`);
  }
});

function runNode(file, source) {
  // Deadline timers are unref'd (as keyed-serializer.js's are): a script awaiting only a timeout keeps itself alive.
  writeFileSync(join(project, file), `const keepAlive = setInterval(() => {}, 1000);\n${source}\n`);
  const result = spawnSync(process.execPath, [file], { cwd: project, encoding: 'utf8' });
  assert.equal(result.status, 0, result.stderr);
  return JSON.parse(result.stdout.trim().split('\n').pop());
}

test('import: the ESM entry from the installed tarball', () => {
  const results = runNode('esm.mjs', `import * as k from 'keyturn';\n${checks}\nconsole.log(JSON.stringify(await checks(k)));\nclearInterval(keepAlive);`);
  assert.ok(allPassed(results), JSON.stringify(results));
});

test('require: the CommonJS entry from the installed tarball', () => {
  const results = runNode('cjs.cjs', `const k = require('keyturn');\n${checks}\nchecks(k).then((r) => { console.log(JSON.stringify(r)); clearInterval(keepAlive); });`);
  assert.ok(allPassed(results), JSON.stringify(results));
});

// Deno 2 and Bun, each from its npm package, resolving 'keyturn' from the project's node_modules
// (Deno by the package's "deno" condition, Bun by "node").
for (const [runtime, argv] of [['deno', ['run', '--quiet', '--allow-read', '--allow-env']], ['bun', ['run']]]) {
  test(`${runtime}: the installed tarball`, () => {
    const file = `${runtime}.mjs`;
    writeFileSync(join(project, file), `const keepAlive = setInterval(() => {}, 1000);\nimport * as k from 'keyturn';\n${checks}\nconsole.log(JSON.stringify({ results: await checks(k), entry: import.meta.resolve('keyturn') }));\nclearInterval(keepAlive);\n`);
    const result = spawnSync(bin(runtime), [...argv, file], { cwd: project, encoding: 'utf8', env: { ...process.env, DENO_NO_UPDATE_CHECK: '1', NO_COLOR: '1' }, timeout: 120000 });
    assert.equal(result.status, 0, result.stderr);
    const { results, entry } = JSON.parse(result.stdout.trim().split('\n').pop());
    assert.ok(allPassed(results), JSON.stringify(results));
    assert.match(entry, runtime === 'deno' ? /node_modules\/keyturn\/deno\.js$/ : /node_modules\/keyturn\/node\.mjs$/);
  });
}

const chromium = browsers().find((browser) => browser.name === 'chromium');

test('the browser entry from the installed tarball, in headless Chromium', { skip: !chromium && 'no chromium and chromedriver' }, async () => {
  const page = `<!doctype html><meta charset="utf-8"><pre id="out">running</pre><script type="module">
    ${checks}
    const out = document.getElementById('out');
    try {
      out.textContent = JSON.stringify(await checks(await import('/node_modules/keyturn/browser.js')));
    } catch (error) {
      out.textContent = JSON.stringify({ error: String(error) });
    }
  </script>`;
  const server = await serveFiles(project, page);
  try {
    const said = await pageSays(chromium, server.url);
    let results;
    try {
      results = JSON.parse(said);
    } catch {
      results = { said };
    }
    assert.ok(allPassed(results), said);
  } finally {
    server.close();
  }
});

test('the workerd entry from the installed tarball: bundled by wrangler, run by Miniflare', async () => {
  const worker = join(project, 'worker');
  mkdirSync(worker, { recursive: true });
  writeFileSync(join(worker, 'index.js'), `import * as k from 'keyturn';\nexport { LockDurableObject } from 'keyturn';\n${checks}\nexport default { async fetch() { return Response.json(await checks(k)); } };\n`);
  writeFileSync(join(project, 'wrangler.toml'), 'name = "consumer"\nmain = "worker/index.js"\ncompatibility_date = "2025-09-01"\n');
  const out = join(work, 'bundle');
  execFileSync(bin('wrangler'), ['deploy', '--dry-run', '--outdir', out], {
    cwd: project,
    env: { ...process.env, WRANGLER_SEND_METRICS: 'false', WRANGLER_SEND_ERROR_REPORTS: 'false', CLOUDFLARE_CF_FETCH_ENABLED: 'false' },
    stdio: 'pipe',
  });
  assert.ok(readdirSync(out).some((file) => file.endsWith('.wasm')), 'wrangler bundled the wasm modules');
  const mf = new Miniflare({
    modules: true,
    modulesRoot: out,
    scriptPath: join(out, 'index.js'),
    modulesRules: [{ type: 'CompiledWasm', include: ['**/*.wasm'] }],
    compatibilityDate: '2025-09-01',
    cf: false,
  });
  try {
    const results = await (await mf.dispatchFetch('http://consumer/')).json();
    assert.ok(allPassed(results), JSON.stringify(results));
  } finally {
    await mf.dispose();
  }
});

// A consumer that uses every export; a misuse that must not compile.
const consumer = (importLine) => `${importLine}

export async function use(env: { LOCKS: { idFromName(name: string): unknown; get(id: unknown): unknown }; BUCKET: { get(key: string): Promise<unknown>; put(key: string, value: string, options?: unknown): Promise<unknown> } }): Promise<number> {
  const store: LockStore = new MemoryStore();
  const serialize: Serialize = createKeyedSerializer({ timeoutMs: DEFAULT_TIMEOUT_MS, maxPending: 10, store, staleMs: LOCK_STALE_MS });
  const options: SerializeOptions = { signal: new AbortController().signal, timeoutMs: 100, onLateSettle: (value: unknown) => void value };
  const fence: number = await serialize('k', async (signal: AbortSignal, turn: Turn) => (signal.aborted ? 0 : turn.fence), options);
  const stats: SerializerStats = serialize.stats();
  const paced: Serialize = createKeyedSerializer({ rate: { limit: 2, periodMs: 100 }, concurrency: 2 });
  const now: string = await paced('k', () => 'now', { ifAvailable: true });
  const lock: Lock | undefined = await acquireLock(store, SERIALIZE_PREFIX + 'k', { waitMs: LOCK_WAIT_MS, staleMs: LOCK_STALE_MS, maxClockSkewMs: 500, storeTimeoutMs: 1000, now: Date.now });
  const lockCounters: LockStats = lockStats(store);
  await lock?.release();
  const held: number = await withLock(store, 'board', (l: Lock) => l.fence + l.slot, { concurrency: 2 });
  const errors: Error[] = [new SerializedWorkTimeout('k', 1), new SerializedQueueFull('k', 1), new SerializedWorkUnavailable('k', 5), new KeyturnInstanceFailed(new Error('x')), new LockStoreError('x'), new LockUnavailable('k', 1), new ConcurrencyMismatch('k', 2, 3)];
  const stores: LockStore[] = [new R2Store(env.BUCKET), new RedisStore(async () => null), new RedisStore(async () => null, { evalShaFn: async (sha: string, keys: string[], args: string[]) => (sha + keys.join() + args.join()).length }), new DurableObjectStore(env.LOCKS), new DenoKvStore({ get: async () => ({ value: null, versionstamp: null }), atomic: () => ({}) }), new SqliteStore((sql: string, params: string[]) => [sql, ...params], { table: 'locks' }), new DynamoDbStore({ putItem: async () => ({}), getItem: async () => ({}) }, { table: 'keyturn-locks', keyAttribute: 'pk' })];
  await new SqliteStore(async () => []).setup();
  const postgres = new PostgresStore(async (text: string, params: unknown[]) => [{ text, params }], { table: 'app.locks', listen: async (channel: string, onNotify: (payload?: string) => void) => () => onNotify(channel) });
  stores.push(postgres, new PostgresStore((text: string) => [text]));
  await postgres.setup();
  const options2: KeyedSerializerOptions & LockOptions = { timeoutMs: 1, waitMs: 1 };
  void [stats.started, stats.paced + stats.unavailable, now, errors, stores, options2, LockDurableObject, lockCounters.readBacksApplied];
  return fence + held + serialize.pending() + serialize.pending('k');
}
`;

const everyType = 'createKeyedSerializer, DEFAULT_TIMEOUT_MS, SERIALIZE_PREFIX, SerializedWorkTimeout, SerializedQueueFull, SerializedWorkUnavailable, KeyturnInstanceFailed, acquireLock, withLock, lockStats, LOCK_STALE_MS, LOCK_WAIT_MS, LockStoreError, LockUnavailable, ConcurrencyMismatch, MemoryStore, R2Store, RedisStore, PostgresStore, DurableObjectStore, DenoKvStore, SqliteStore, DynamoDbStore, LockDurableObject, type Serialize, type SerializeOptions, type SerializerStats, type Turn, type KeyedSerializerOptions, type LockStore, type Lock, type LockOptions, type LockStats';

const misuse = (importLine) => `${importLine}
const serialize = createKeyedSerializer({ timeoutMs: '5' });
serialize('k', 5);
void acquireLock(new MemoryStore(), 'k', { waitMs: 'long' });
`;

function tsc(dir, compilerOptions, files) {
  mkdirSync(dir, { recursive: true });
  for (const [name, source] of Object.entries(files)) writeFileSync(join(dir, name), source);
  writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify({ compilerOptions: { strict: true, exactOptionalPropertyTypes: true, noEmit: true, skipLibCheck: false, lib: ['es2022', 'dom'], ...compilerOptions }, files: Object.keys(files) }));
  return spawnSync(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-p', dir], { encoding: 'utf8' });
}

test('TypeScript consumers compile against the installed types (strict, exactOptionalPropertyTypes) under nodenext ESM and CommonJS and bundler; misuse does not', () => {
  const esm = `import { ${everyType} } from 'keyturn';`;
  const cases = [
    ['nodenext-esm', { module: 'nodenext', moduleResolution: 'nodenext' }, 'use.mts', esm],
    ['nodenext-cjs', { module: 'nodenext', moduleResolution: 'nodenext' }, 'use.cts', esm],
    ['bundler', { module: 'esnext', moduleResolution: 'bundler' }, 'use.ts', esm],
  ];
  for (const [name, options, file, importLine] of cases) {
    const good = tsc(join(project, 'ts', name), options, { [file]: consumer(importLine) });
    assert.equal(good.status, 0, `${name}: ${good.stdout}${good.stderr}`);
    const bad = tsc(join(project, 'ts', `${name}-misuse`), options, { [file.replace('use', 'misuse')]: misuse(`import { createKeyedSerializer, acquireLock, MemoryStore } from 'keyturn';`) });
    assert.notEqual(bad.status, 0, `${name}: the misuse compiled`);
    for (const code of ['TS2322', 'TS2345']) assert.match(bad.stdout, new RegExp(code), `${name}: ${bad.stdout}`);
  }
});

test('the consumer above names every value export of the package', async () => {
  const k = await import(join(installed, 'node.mjs'));
  const named = new Set(everyType.split(', ').filter((name) => !name.startsWith('type ')));
  const missing = Object.keys(k).filter((name) => !named.has(name));
  assert.deepEqual(missing, [], 'exports the TypeScript consumer does not use');
});
