// One benchmark process: `node concurrency-one.mjs <impl> <keys> <works> <rounds> <n>` prints
// JSON {impl, keys, works, n, cold, perSecond: [...]}: works/s of the process's first round
// (`cold`) and of each round after it (warm). Every caller awaits its own result and the works
// are `async () => {}`, at most `n` of a key at once. Implementations: `keyturn`
// (`createKeyedSerializer({ concurrency: n })`), and runtimes/semaphore-peers.mjs's `floor`,
// `p-limit` and `async-sema`.
import { semaphorePeers } from './runtimes/semaphore-peers.mjs';

const [impl, keysArg, worksArg, roundsArg, nArg] = process.argv.slice(2);
const [keys, works, rounds, n] = [keysArg, worksArg, roundsArg, nArg].map(Number);

const create = impl === 'keyturn' ? (await import('keyturn')).createKeyedSerializer : undefined;
const limit = create !== undefined ? create({ concurrency: n }) : semaphorePeers[impl](n);
const names = Array.from({ length: keys }, (_, i) => `object-${i}`);
const asyncWork = async () => {};

async function round() {
  const callers = new Array(works);
  const call = async (key) => {
    await limit(key, asyncWork);
  };
  for (let i = 0; i < works; i++) callers[i] = call(names[i % keys]);
  await Promise.all(callers);
}

const timed = async () => {
  const started = performance.now();
  await round();
  return works / ((performance.now() - started) / 1000);
};

const cold = await timed();
const perSecond = [];
for (let r = 0; r < rounds; r++) perSecond.push(await timed());
console.log(JSON.stringify({ impl, keys, works, n, cold, perSecond }));
