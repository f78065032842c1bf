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
