// What the packaging and bundler tests share: the package packed and installed into a fresh
// project as npm users receive it, and the checks every entry runs, by name.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const root = fileURLToPath(new URL('../..', import.meta.url));

/** `npm pack` of pkg/ into `work`: npm's report of the tarball (`filename`, `shasum`, …). */
export function packTarball(work) {
  const out = execFileSync('npm', ['pack', join(root, 'pkg'), '--pack-destination', work, '--json'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  return JSON.parse(out)[0];
}

/**
 * `npm pack` of pkg/ into `work`, installed (the tarball, not a link) into `work/consumer`:
 * `{ project, installed, packed }` (`packed` is npm's report of the tarball).
 */
export function installTarball(work) {
  const packed = packTarball(work);
  const project = join(work, 'consumer');
  mkdirSync(project);
  writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'consumer', private: true, type: 'module' }));
  execFileSync('npm', ['install', '--offline', '--no-audit', '--no-fund', '--ignore-scripts', join(work, packed.filename)], { cwd: project, stdio: 'pipe' });
  return { project, installed: join(project, 'node_modules/keyturn'), packed };
}

// What every entry checks, by name: the serializer (order, timeout, caller signal, a store's
// fences) and the lock over MemoryStore (fences at least the clock's: 1000 per millisecond).
// `k` is the package's namespace.
export const checks = `async function checks(k) {
  const results = {};
  const serialize = k.createKeyedSerializer({ timeoutMs: 50 });
  const log = [];
  const a = serialize('x', async () => { log.push('a'); await new Promise((r) => setTimeout(r, 2)); return 'a'; });
  const b = serialize('x', () => { log.push('b'); return 'b'; });
  results.order = (await a) === 'a' && (await b) === 'b' && log.join() === 'a,b';
  const timedOut = await serialize('x', () => new Promise(() => {})).catch((e) => e);
  results.timeout = timedOut instanceof k.SerializedWorkTimeout && timedOut.key === 'x' && timedOut.timeoutMs === 50;
  const controller = new AbortController();
  const held = serialize('y', () => new Promise((r) => setTimeout(r, 20)));
  const cancelled = serialize('y', () => 'never', { signal: controller.signal });
  controller.abort('left');
  results.signal = (await cancelled.catch((e) => e)) === 'left' && (await held) === undefined;
  const store = new k.MemoryStore();
  const clockFence = Math.floor(Date.now()) * 1000;
  const first = await k.acquireLock(store, 'board');
  const busy = await k.acquireLock(store, 'board', { waitMs: 5 });
  await first.release();
  const second = await k.acquireLock(store, 'board');
  await second.release();
  results.lock = first.fence >= clockFence && busy === undefined && second.fence > first.fence && Number.isSafeInteger(second.fence);
  const shared = k.createKeyedSerializer({ store });
  const fences = await Promise.all([1, 2, 3].map(() => shared('z', (signal, turn) => turn.fence)));
  results.storeSerializer = clockFence <= fences[0] && fences[0] < fences[1] && fences[1] < fences[2];
  results.constants = k.DEFAULT_TIMEOUT_MS === 30000 && k.LOCK_WAIT_MS === 100 && k.SERIALIZE_PREFIX === 'keyturn:serialize:';
  return results;
}`;

export const allPassed = (results) => Object.keys(results).length === 6 && Object.values(results).every((ok) => ok === true);

/**
 * An example project of examples/ made ready as its user would: `npm install` of its
 * package.json, keyturn from the packed tarball (`packed`, in `work`) in place of the registry's,
 * dev dependencies left out (the tests use the repository's wrangler, and the AWS SDK a Lambda
 * runtime provides). Cached in the example's node_modules (gitignored): installed again only when
 * its package.json or the tarball changed.
 * @param {string} dir
 * @param {string} work
 * @param {{ filename: string, shasum: string }} packed
 */
export function installExample(dir, work, packed) {
  const stamp = join(dir, 'node_modules/.keyturn-example');
  const want = `${packed.shasum} ${createHash('sha256').update(readFileSync(join(dir, 'package.json'))).digest('hex')}`;
  if (existsSync(stamp) && readFileSync(stamp, 'utf8') === want) return;
  execFileSync('npm', ['install', '--no-save', '--no-package-lock', '--omit=dev', '--no-audit', '--no-fund', '--ignore-scripts', join(work, packed.filename)], { cwd: dir, stdio: 'pipe' });
  writeFileSync(stamp, want);
}
