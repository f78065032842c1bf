// The projects of examples/, one per platform, each made ready as its user would (npm install
// from its package.json, keyturn from the packed tarball; tests/js/installed.mjs), built where
// there is a build, run, and sent concurrent requests from two instances at once — two
// isolates, two processes — over one store: each POST answers a count no other did, and the
// count read after is exactly how many were sent. Workers and Hono: wrangler's build in
// Miniflare as two isolates sharing the Durable Objects and R2; Deno Deploy: Deno.serve over a
// local Deno KV file (one process: several on one file answer "database is locked"); Node: two
// servers over a postgresql of the test's own; Lambda: the handler in the emulated Node runtime
// (tests/runtimes/lambda-runtime.mjs), cold then warm, then two instances over dynalite.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { installExample, packTarball, root } from './installed.mjs';
import { createTable, dynamoClient, haveDynalite, startDynalite } from '../runtimes/dynalite-server.mjs';
import { lineProcess } from '../runtimes/line-process.mjs';
import { freePort } from '../runtimes/ports.mjs';
import { havePostgresServer, startPostgresServer } from '../runtimes/postgres-server.mjs';
import { workerdPair } from '../runtimes/workerd.mjs';

const REQUESTS = 60;
const bin = (name) => join(root, 'node_modules/.bin', name);
const example = (name) => join(root, 'examples', name);
const work = mkdtempSync(join(tmpdir(), 'keyturn-examples-'));
let packed;

before(() => {
  packed = packTarball(work);
});
after(() => rmSync(work, { recursive: true, force: true }));

// An example runs inside the repository, where a package it forgot would still resolve from the
// repository's node_modules: so each names in its package.json every package its source imports.
test('every example names in its package.json each package its source imports', () => {
  for (const name of readdirSync(join(root, 'examples')).filter((entry) => existsSync(join(example(entry), 'package.json')))) {
    const manifest = JSON.parse(readFileSync(join(example(name), 'package.json'), 'utf8'));
    const named = new Set(Object.keys({ ...manifest.dependencies, ...manifest.devDependencies }));
    // examples/nextjs-webpack holds only what building examples/nextjs with Next 15's webpack
    // needs: nextjs.test.mjs copies the app in.
    if (name === 'nextjs-webpack') continue;
    // What a user copies: the files the repository holds (not what a build or a test put there).
    const tracked = execFileSync('git', ['ls-files'], { cwd: example(name), encoding: 'utf8' }).split('\n');
    const sources = tracked.filter((file) => /\.(m?js|ts)$/.test(file));
    assert.ok(sources.length > 0, `examples/${name} has a source file`);
    for (const file of sources) {
      for (const [, specifier] of readFileSync(join(example(name), file), 'utf8').matchAll(/^(?:import|export)[^'"]*from '([^'.][^']*)'/gm)) {
        if (/^(node|cloudflare|npm|jsr|bun):/.test(specifier)) continue;
        const pkg = specifier.startsWith('@') ? specifier.split('/').slice(0, 2).join('/') : specifier.split('/')[0];
        assert.ok(named.has(pkg), `examples/${name}/${file} imports ${pkg}, which its package.json does not name`);
      }
    }
  }
});

/** `REQUESTS` POSTs at once through `post(i)`: their counts are 1 … REQUESTS, each once. */
async function countsOnce(post) {
  const counts = await Promise.all(Array.from({ length: REQUESTS }, (_, i) => post(i)));
  assert.deepEqual(counts.toSorted((a, b) => a - b), Array.from({ length: REQUESTS }, (_, i) => i + 1), `counts answered: ${counts}`);
}

/** A body's JSON, the status required 200. */
async function ok(response) {
  const body = await response.text();
  assert.equal(response.status, 200, body);
  return JSON.parse(body);
}

/** Runs `command` until it prints `ready` (a RegExp): `{ child, said() }`; stop by its PID. */
async function started(command, args, options, ready) {
  const child = spawn(command, args, { ...options, stdio: ['ignore', 'pipe', 'pipe'] });
  let said = '';
  child.stdout.on('data', (chunk) => (said += chunk));
  child.stderr.on('data', (chunk) => (said += chunk));
  const deadline = Date.now() + 60000;
  while (!ready.test(said)) {
    assert.ok(Date.now() < deadline && child.exitCode === null, `${args.join(' ')} did not start: ${said}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return { child, said: () => said };
}

const wranglerEnv = { ...process.env, WRANGLER_SEND_METRICS: 'false', WRANGLER_SEND_ERROR_REPORTS: 'false', CLOUDFLARE_CF_FETCH_ENABLED: 'false' };

for (const [name, path] of [['workers', (id) => `/${id}`], ['hono-workers', (id) => `/counters/${id}`]]) {
  test(`examples/${name}: built by wrangler, two isolates in Miniflare, ${REQUESTS} POSTs counted exactly`, async () => {
    const dir = example(name);
    installExample(dir, work, packed);
    execFileSync(bin('wrangler'), ['deploy', '--dry-run', '--outdir', 'dist'], { cwd: dir, env: wranglerEnv, stdio: 'pipe' });
    const mf = workerdPair(`examples/${name}/dist/index.js`);
    try {
      const isolates = [await mf.getWorker('a'), await mf.getWorker('b')];
      await countsOnce(async (i) => (await ok(await isolates[i % 2].fetch(`http://example${path('order-1')}`, { method: 'POST' }))).count);
      assert.equal((await ok(await isolates[1].fetch(`http://example${path('order-1')}`))).count, REQUESTS);
      assert.equal((await ok(await isolates[0].fetch(`http://example${path('other')}`))).count, 0);
    } finally {
      await mf.dispose();
    }
  });
}

const deno = bin('deno');

test(`examples/deno-deploy: deno check, then Deno.serve over a Deno KV file, ${REQUESTS} POSTs counted exactly`, { skip: !existsSync(deno) && 'no deno' }, async () => {
  const dir = example('deno-deploy');
  installExample(dir, work, packed);
  const env = { ...process.env, DENO_NO_UPDATE_CHECK: '1', NO_COLOR: '1', DENO_DIR: join(work, 'deno-dir') };
  execFileSync(deno, ['check', '--quiet', 'main.ts'], { cwd: dir, env, stdio: 'pipe' });
  const port = await freePort();
  const server = await started(deno, ['run', '--no-prompt', '--allow-net', '--allow-env', `--allow-read=${dir},${work}`, `--allow-write=${work}`, 'main.ts'], { cwd: dir, env: { ...env, PORT: String(port), KV_PATH: join(work, 'kv.sqlite3') } }, /Listening on/);
  try {
    const url = `http://127.0.0.1:${port}/order-1`;
    await countsOnce(async () => (await ok(await fetch(url, { method: 'POST' }))).count);
    assert.equal((await ok(await fetch(url))).count, REQUESTS);
  } finally {
    server.child.kill('SIGKILL');
  }
});

test(`examples/node-postgres: two servers over one postgresql, ${REQUESTS} POSTs counted exactly`, { skip: !havePostgresServer() && 'no postgresql server' }, async () => {
  const dir = example('node-postgres');
  installExample(dir, work, packed);
  const pg = await startPostgresServer();
  const servers = [];
  try {
    // One after the other: the first creates the tables.
    for (let i = 0; i < 2; i++) {
      const port = await freePort();
      servers.push({ port, ...(await started(process.execPath, ['server.mjs'], { cwd: dir, env: { ...process.env, DATABASE_URL: pg.url, PORT: String(port) } }, /listening on/)) });
    }
    const url = (i) => `http://127.0.0.1:${servers[i % 2].port}/order-1`;
    await countsOnce(async (i) => (await ok(await fetch(url(i), { method: 'POST' }))).count);
    assert.equal((await ok(await fetch(url(0)))).count, REQUESTS);
  } finally {
    for (const { child } of servers) child.kill('SIGKILL');
    await pg.close();
  }
});

/** An API Gateway HTTP API event (payload format 2.0), as Lambda receives it. */
function httpApiEvent(method, path) {
  const now = new Date();
  return {
    version: '2.0',
    routeKey: '$default',
    rawPath: path,
    rawQueryString: '',
    headers: { accept: '*/*', host: 'abc123.execute-api.us-east-1.amazonaws.com', 'user-agent': 'curl/8.5.0', 'x-forwarded-proto': 'https' },
    requestContext: {
      accountId: '123456789012',
      apiId: 'abc123',
      domainName: 'abc123.execute-api.us-east-1.amazonaws.com',
      domainPrefix: 'abc123',
      http: { method, path, protocol: 'HTTP/1.1', sourceIp: '203.0.113.7', userAgent: 'curl/8.5.0' },
      requestId: `${now.getTime()}-${Math.random()}`,
      routeKey: '$default',
      stage: '$default',
      time: now.toUTCString(),
      timeEpoch: now.getTime(),
    },
    isBase64Encoded: false,
  };
}

/** The docs' Lambda handlers: fenced blocks of README.md and docs/*.md tagged ```js lambda. */
function lambdaSnippets() {
  const docs = existsSync(join(root, 'docs')) ? readdirSync(join(root, 'docs')).filter((name) => name.endsWith('.md')).map((name) => join('docs', name)) : [];
  return ['README.md', ...docs].flatMap((file) => [...readFileSync(join(root, file), 'utf8').matchAll(/^```js lambda[ \t]*\n([\s\S]*?)^```[ \t]*$/gm)].map(([, code], i) => ({ code, where: `${file} #${i + 1}` })));
}

const lambdas = lambdaSnippets();

test('every Lambda handler of README.md and docs/*.md (```js lambda) answers a cold and a warm HTTP API invocation', { skip: (!haveDynalite() && 'no dynalite') || (lambdas.length === 0 && 'no ```js lambda block in the docs') }, async () => {
  const dir = example('lambda-dynamodb');
  installExample(dir, work, packed);
  const dynalite = await startDynalite();
  try {
    for (const [i, { code, where }] of lambdas.entries()) {
      // Beside the example, whose node_modules hold keyturn from the tarball.
      const taskRoot = join(dir, 'dist', `snippet-${i}`);
      mkdirSync(taskRoot, { recursive: true });
      writeFileSync(join(taskRoot, 'index.mjs'), code);
      const env = { AWS_REGION: 'us-east-1', AWS_ACCESS_KEY_ID: 'keyturn-test', AWS_SECRET_ACCESS_KEY: 'keyturn-test', AWS_ENDPOINT_URL_DYNAMODB: dynalite.endpoint };
      const instance = lineProcess(join(root, 'tests/runtimes/lambda-runtime.mjs'), { taskRoot, handler: 'index.handler', env });
      try {
        assert.equal((await instance.send({ op: 'init' })).handlerType, 'function', where);
        for (const method of ['POST', 'POST', 'GET']) {
          const answer = await instance.send({ op: 'invoke', event: httpApiEvent(method, '/order-1'), timeoutMs: 30000 });
          assert.equal(answer.result?.statusCode, 200, `${where}: ${JSON.stringify(answer)}`);
        }
      } finally {
        instance.stop();
      }
    }
  } finally {
    dynalite.stop();
  }
});

test(`examples/lambda-dynamodb: the handler in the Node runtime, cold then warm, then two instances over dynalite, ${REQUESTS} POSTs counted exactly`, { skip: !haveDynalite() && 'no dynalite' }, async () => {
  const dir = example('lambda-dynamodb');
  installExample(dir, work, packed);
  const dynalite = await startDynalite();
  const instances = [];
  try {
    // The counters table is the deployment's (the example's README creates it); keyturn's own
    // table is made by the handler's init, by both instances at once.
    const client = await dynamoClient(dynalite.endpoint);
    await createTable(client, 'counters', 'id');
    client.destroy();
    // The AWS SDK, a dev dependency the runtime provides, resolves from the repository's
    // node_modules above the example; the endpoint is the SDK's own variable, as any would be.
    const env = { AWS_REGION: 'us-east-1', AWS_ACCESS_KEY_ID: 'keyturn-test', AWS_SECRET_ACCESS_KEY: 'keyturn-test', AWS_ENDPOINT_URL_DYNAMODB: dynalite.endpoint };
    for (let i = 0; i < 2; i++) instances.push(lineProcess(join(root, 'tests/runtimes/lambda-runtime.mjs'), { taskRoot: dir, handler: 'index.handler', env }));
    const inits = await Promise.all(instances.map((instance) => instance.send({ op: 'init' })));
    for (const init of inits) assert.equal(init.handlerType, 'function', JSON.stringify(init));
    const invoke = async (instance, method, path) => {
      const answer = await instance.send({ op: 'invoke', event: httpApiEvent(method, path), timeoutMs: 30000 });
      assert.equal(answer.result?.statusCode, 200, JSON.stringify(answer));
      return JSON.parse(answer.result.body);
    };
    // Cold, then warm: the module was evaluated once, and both invocations counted.
    assert.equal((await invoke(instances[0], 'POST', '/warm')).count, 1);
    assert.equal((await invoke(instances[0], 'POST', '/warm')).count, 2);
    assert.equal((await invoke(instances[0], 'GET', '/warm')).count, 2);
    assert.deepEqual(await instances[0].send({ op: 'loads' }), { loads: 1 });
    // Two instances at once, each one invocation at a time, as Lambda runs them.
    const counts = await Promise.all(
      instances.map(async (instance) => {
        const mine = [];
        for (let i = 0; i < REQUESTS / 2; i++) mine.push((await invoke(instance, 'POST', '/order-1')).count);
        return mine;
      }),
    );
    for (const mine of counts) assert.ok(mine.every((count, i) => i === 0 || count > mine[i - 1]), `an instance's counts rise: ${mine}`);
    assert.deepEqual(counts.flat().toSorted((a, b) => a - b), Array.from({ length: REQUESTS }, (_, i) => i + 1));
    assert.equal((await invoke(instances[1], 'GET', '/order-1')).count, REQUESTS);
  } finally {
    for (const instance of instances) instance.stop();
    dynalite.stop();
  }
});
