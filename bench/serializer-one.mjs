// One benchmark process: `node serializer-one.mjs <impl> <keys> <works> <rounds>` prints JSON
// {impl, keys, works, perSecond: [...]} — works/s of each measured round after one warm-up.
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { dirname, join } from 'node:path';

const [impl, keysArg, worksArg, roundsArg] = process.argv.slice(2);
const keys = Number(keysArg);
const works = Number(worksArg);
const rounds = Number(roundsArg);
const here = dirname(fileURLToPath(import.meta.url));
const require = createRequire(import.meta.url);

const noop = process.env.ASYNC ? async () => {} : () => {};

// The seed with its deadline, abort signal and late-settle report taken out: the per-key tails,
// and the cleanup that lets an idle key go. `withAbort` adds one AbortController per work, the
// one cost no implementation that hands out a real signal can avoid.
function bareChain(withAbort) {
  const tails = new Map();
  return (key, work) => {
    const previous = tails.get(key) || Promise.resolve();
    const result = previous.then(withAbort ? () => work(new AbortController().signal) : () => work());
    const tail = result.then(noop, noop);
    tails.set(key, tail);
    tail.then(() => {
      if (tails.get(key) === tail) tails.delete(key);
    });
    return result;
  };
}

async function factory() {
  switch (impl) {
    case 'keyturn':
      return (await import('keyturn')).createKeyedSerializer;
    case 'seed':
      return require(process.env.KEYTURN_SEED ?? join(here, '../../shared/seeds/keyed-serializer.js')).createKeyedSerializer;
    case 'chain':
      return () => bareChain(false);
    case 'floor':
      return () => bareChain(true);
    default:
      throw new Error(`unknown implementation ${impl}`);
  }
}

const create = await factory();
const names = Array.from({ length: keys }, (_, i) => `object-${i}`);

async function round() {
  const serialize = create();
  const last = new Array(keys);
  const started = performance.now();
  for (let i = 0; i < works; i++) last[i % keys] = serialize(names[i % keys], noop);
  await Promise.all(last);
  const elapsed = performance.now() - started;
  if (serialize.pending && serialize.pending() !== 0) throw new Error(`${impl}: pending() is not 0 after the round`);
  return works / (elapsed / 1000);
}

await round();
const perSecond = [];
for (let i = 0; i < rounds; i++) perSecond.push(await round());
process.stdout.write(JSON.stringify({ impl, keys, works, perSecond }) + '\n');
