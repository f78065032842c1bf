// Deno from the npm registry: DenoKvStore on the real Deno KV engine runs the contract, and the
// documentation's Deno snippets are checked and run.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync, existsSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../..', import.meta.url));
const deno = join(root, 'node_modules/.bin/deno');

test('DenoKvStore passes the store contract on Deno KV', { skip: !existsSync(deno) && 'no deno' }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'keyturn-deno-'));
  try {
    const out = execFileSync(deno, ['run', '--quiet', '--no-prompt', '--unstable-kv', `--allow-read=${root},${dir}`, `--allow-write=${dir}`, join(root, 'tests/runtimes/deno-kv.mjs'), join(dir, 'kv.sqlite3')], {
      cwd: root,
      env: { ...process.env, DENO_NO_UPDATE_CHECK: '1', NO_COLOR: '1', DENO_DIR: join(dir, 'deno-dir') },
      encoding: 'utf8',
      timeout: 120000,
    });
    assert.deepEqual(JSON.parse(out.trim().split('\n').pop()).failures, []);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('tracing on Deno: a subscriber hears a turn, and the package never reads the process global', { skip: !existsSync(deno) && 'no deno' }, () => {
  const out = execFileSync(deno, ['run', '--quiet', '--no-prompt', `--allow-read=${root}`, join(root, 'tests/runtimes/deno-tracing.mjs')], {
    cwd: root,
    env: { ...process.env, DENO_NO_UPDATE_CHECK: '1', NO_COLOR: '1' },
    encoding: 'utf8',
    timeout: 120000,
  });
  const { value, heard, trapped, processRead } = JSON.parse(out.trim().split('\n').pop());
  assert.equal(value, 1);
  assert.deepEqual(heard, [
    { name: 'keyturn:turn:wait', key: 'k' },
    { name: 'keyturn:turn:start', key: 'k' },
    { name: 'keyturn:turn:end', key: 'k', ok: true },
  ]);
  assert.ok(trapped, "Deno's process global is a getter: the trap is set");
  assert.equal(processRead, false, 'the package read the process global');
});

// Every Deno snippet of README.md and docs/*.md, type-checked by `deno check` (JS too) and run as
// written by `deno run`, from a project on the packed tarball. A snippet is a fenced block whose
// info string has the word `deno` (```ts deno, ```js deno), or a js/ts block that uses the
// `Deno.` global. A first line `// deno <flags> main.js` gives its flags; a snippet that
// serves (`Deno.serve`) is sent concurrent requests, each answered 2xx; every other one must end,
// printing what its `console.log(…); // what` comments say.
const SNIPPET_LANGS = new Set(['js', 'ts', 'javascript', 'typescript', 'jsx', 'tsx']);

/** The Deno snippets of `markdown`: `{ lang, code }`. */
export function denoSnippets(markdown) {
  return [...markdown.matchAll(/^```([^\n]*)\n([\s\S]*?)^```[ \t]*$/gm)]
    .map(([, info, code]) => ({ words: info.trim().toLowerCase().split(/[\s,]+/), code }))
    .filter(({ words, code }) => words.includes('deno') || (SNIPPET_LANGS.has(words[0]) && /\bDeno\.\w/.test(code)))
    .map(({ words, code }) => ({ lang: /^(ts|typescript|tsx)$/.test(words[0]) ? 'ts' : 'js', code }));
}

test('the snippet finder takes tagged blocks and blocks using Deno, nothing else', () => {
  const found = denoSnippets(['```js deno', 'a()', '```', '```ts', 'Deno.serve(f)', '```', '```js browser', 'b()', '```', '```ts', 'c()', '```', '```sh', 'deno run x', '```'].join('\n'));
  assert.deepEqual(found, [{ lang: 'js', code: 'a()\n' }, { lang: 'ts', code: 'Deno.serve(f)\n' }]);
});

test('every Deno snippet of README.md and docs/*.md passes deno check and runs as written', { skip: !existsSync(deno) && 'no deno', timeout: 300000 }, async () => {
  const { installTarball } = await import('./installed.mjs');
  const docs = existsSync(join(root, 'docs')) ? readdirSync(join(root, 'docs')).filter((name) => name.endsWith('.md')).map((name) => join('docs', name)) : [];
  const snippets = ['README.md', ...docs].flatMap((file) => denoSnippets(readFileSync(join(root, file), 'utf8')).map((snippet, i) => ({ ...snippet, where: `${file} #${i + 1}` })));
  assert.ok(snippets.length >= 1, 'the README has a Deno snippet');
  const work = mkdtempSync(join(tmpdir(), 'keyturn-deno-snippets-'));
  try {
    const { project } = installTarball(work);
    // checkJs: a JS snippet is checked against the package's types as a TS one is.
    writeFileSync(join(project, 'deno.json'), JSON.stringify({ compilerOptions: { checkJs: true } }));
    const env = { ...process.env, DENO_NO_UPDATE_CHECK: '1', NO_COLOR: '1', DENO_DIR: join(work, 'deno-dir') };
    for (const [i, { lang, code, where }] of snippets.entries()) {
      const file = `snippet-${i}.${lang}`;
      writeFileSync(join(project, file), code);
      const given = code.match(/^\/\/ deno run (.*) main\.[jt]sx?$/m)?.[1].split(' ') ?? ['--unstable-kv', '--allow-read', '--allow-env'];
      const check = spawnSync(deno, ['check', '--quiet', ...given.filter((flag) => flag.startsWith('--unstable')), file], { cwd: project, env, encoding: 'utf8', timeout: 120000 });
      assert.equal(check.status, 0, `deno check of ${where}:\n${check.stderr}${check.stdout}`);
      if (/\bDeno\.serve\(/.test(code)) await servesRequests(project, env, given, file, where);
      else {
        const run = spawnSync(deno, ['run', '--quiet', '--no-prompt', ...given, file], { cwd: project, env, encoding: 'utf8', timeout: 120000 });
        assert.equal(run.status, 0, `deno run of ${where}:\n${run.stderr}`);
        const said = [...code.matchAll(/console\.log\(.*\); \/\/ (.*)$/gm)].map(([, what]) => what);
        const lines = run.stdout.trim().split('\n').filter(Boolean);
        assert.equal(lines.length, said.length, `${where} printed ${JSON.stringify(lines)}, promised ${JSON.stringify(said)}`);
        lines.forEach((line, j) => assert.ok(said[j].startsWith(line), `${where} printed ${JSON.stringify(line)}, says ${JSON.stringify(said[j])}`));
      }
    }
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
});

/**
 * Runs a serving snippet with `PORT` set to a free port, waits until it listens — on the port
 * Deno says, or PORT — sends it 20 requests at once, and stops it by its PID.
 */
async function servesRequests(project, env, given, file, where) {
  const { freePort } = await import('../runtimes/ports.mjs');
  const port = await freePort();
  const flags = [...new Set([...given, '--allow-net', '--allow-env'])];
  const child = spawn(deno, ['run', '--no-prompt', ...flags, file], { cwd: project, env: { ...env, PORT: String(port) }, stdio: ['ignore', 'pipe', 'pipe'] });
  let said = '';
  child.stdout.on('data', (chunk) => (said += chunk));
  child.stderr.on('data', (chunk) => (said += chunk));
  const answers = async (at) => Promise.all(Array.from({ length: 20 }, () => fetch(`http://127.0.0.1:${at}/`)));
  try {
    const deadline = Date.now() + 60000;
    let got;
    while (got === undefined) {
      assert.ok(Date.now() < deadline && child.exitCode === null, `${where} did not listen: ${said}`);
      const at = Number(said.match(/Listening on https?:\/\/\S+:(\d+)/)?.[1] ?? port);
      got = await answers(at).catch(() => undefined);
      if (got === undefined) await new Promise((resolve) => setTimeout(resolve, 100));
    }
    assert.ok(got.every((answer) => answer.ok), `${where} answered ${got.map((answer) => answer.status)}`);
    await Promise.all(got.map((answer) => answer.arrayBuffer()));
  } finally {
    child.kill('SIGKILL');
  }
}
