// Runs inside workerd (Miniflare) at the platform's limits: workerd allows 10 000 active
// timeouts per request and throws QuotaExceededError past it. Each route answers JSON.
//
//   GET /serialize?works=N&keys=K   N async works over K keys in one request, every caller
//                                   awaiting its own result; checks per-key order
//   GET /fill-timers                fills this request's timer quota, then serializes one work
//   GET /lock?contenders=N          N contenders for one lock name in one request
import { acquireLock, createKeyedSerializer, MemoryStore } from '../../pkg/workerd.js';

/** The serializer under test: this package's, or one a bench worker passes in. */
export async function serializeMany(create, works, keys) {
  const serialize = create({ timeoutMs: 30_000 });
  const last = new Array(keys).fill(-1);
  let outOfOrder = 0;
  let running = 0;
  let overlaps = 0;
  const runningPerKey = new Array(keys).fill(0);
  const call = async (i) => {
    const key = i % keys;
    await serialize(`object-${key}`, async () => {
      if (last[key] > i) outOfOrder += 1;
      last[key] = i;
      runningPerKey[key] += 1;
      running += 1;
      if (runningPerKey[key] > 1) overlaps += 1;
      await null;
      runningPerKey[key] -= 1;
      running -= 1;
    });
  };
  const started = Date.now();
  const callers = new Array(works);
  for (let i = 0; i < works; i++) callers[i] = call(i);
  const outcomes = await Promise.allSettled(callers);
  const failed = outcomes.filter((outcome) => outcome.status === 'rejected').map((outcome) => String(outcome.reason));
  return {
    works,
    keys,
    ms: Date.now() - started,
    outOfOrder,
    overlaps,
    failed: failed.length,
    firstFailure: failed[0],
    pending: serialize.pending(),
  };
}

async function fillTimers() {
  let armed = 0;
  let refusal;
  try {
    for (; armed < 20_000; armed++) setTimeout(() => {}, 60_000);
  } catch (error) {
    refusal = `${error.name}: ${error.message}`;
  }
  const serialize = createKeyedSerializer({ timeoutMs: 1000 });
  let outcome;
  try {
    outcome = { value: await serialize('k', async () => 'ran') };
  } catch (error) {
    outcome = { error: `${error.name}: ${error.message}` };
  }
  return { armed, refusal, outcome, pending: serialize.pending() };
}

async function lockMany(contenders) {
  const store = new MemoryStore();
  const started = Date.now();
  let holders = 0;
  let overlaps = 0;
  let lastFence = 0;
  let fencesRising = true;
  const one = async () => {
    const lock = await acquireLock(store, 'board', { waitMs: 600_000, staleMs: 600_000 });
    if (!lock) return 'unavailable';
    holders += 1;
    if (holders > 1) overlaps += 1;
    if (lock.fence <= lastFence) fencesRising = false;
    lastFence = lock.fence;
    await null;
    holders -= 1;
    await lock.release();
    return 'held';
  };
  const outcomes = await Promise.allSettled(Array.from({ length: contenders }, one));
  const held = outcomes.filter((outcome) => outcome.value === 'held').length;
  const failed = outcomes.filter((outcome) => outcome.status === 'rejected').map((outcome) => String(outcome.reason));
  return { contenders, held, overlaps, fencesRising, failed: failed.length, firstFailure: failed[0], ms: Date.now() - started };
}

export default {
  async fetch(request) {
    const url = new URL(request.url);
    const number = (name, fallback) => Number(url.searchParams.get(name) ?? fallback);
    switch (url.pathname) {
      case '/serialize':
        return Response.json(await serializeMany(createKeyedSerializer, number('works', 1000), number('keys', 1)));
      case '/fill-timers':
        return Response.json(await fillTimers());
      case '/lock':
        return Response.json(await lockMany(number('contenders', 100)));
      default:
        return new Response('no such route', { status: 404 });
    }
  },
};
