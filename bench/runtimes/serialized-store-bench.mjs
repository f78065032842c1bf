// Times a serializer with a store inside whatever runtime runs it (Node over Redis, workerd over
// the Durable Object store): per-work time and store calls for 16 concurrent works on one key in
// one isolate, beside the in-isolate serializer and the hand-built serializer + withLock; then
// two isolates (two store objects over one storage: two lock managers) strictly alternating.
import { Counting } from './store-bench.mjs';

const now = () => performance.now();
const median = (values) => [...values].sort((a, b) => a - b)[values.length >> 1];
const tick = () => new Promise((resolve) => setTimeout(resolve, 0));

/** `rounds` times: 16 works on one fresh key at once, every caller awaiting its own result. */
async function sixteen(serialize, rounds, key) {
  const perWork = [];
  for (let round = 0; round < rounds; round++) {
    const started = now();
    await Promise.all(Array.from({ length: 16 }, () => serialize(`${key}-${round}`, async (signal, turn) => turn?.fence)));
    perWork.push(((now() - started) / 16) * 1000);
    await tick();
  }
  return median(perWork);
}

export async function benchSerializedStore(makeStore, keyturn, { rounds = 30, alternations = 100 } = {}) {
  const { createKeyedSerializer, withLock } = keyturn;
  const key = `bench-${crypto.randomUUID()}`;

  const local = createKeyedSerializer();
  const localUs = await sixteen(local, rounds, `${key}-local`);

  const store = new Counting(makeStore());
  const shared = createKeyedSerializer({ store });
  const sharedUs = await sixteen(shared, rounds, `${key}-store`);
  const sharedCallsPerWork = store.calls / (rounds * 16);

  // Today's example before this: a serializer, then withLock inside each work.
  const byHand = new Counting(makeStore());
  const handSerializer = createKeyedSerializer();
  const handBuilt = (k, work) => handSerializer(k, (signal) => withLock(byHand, `object:${k}`, (lock) => work(signal, lock), { waitMs: 10000, signal }));
  const handUs = await sixteen(handBuilt, rounds, `${key}-hand`);
  const handCallsPerWork = byHand.calls / (rounds * 16);

  // Two isolates strictly alternating on one key: A, B, A, B, … each awaited.
  // Two store objects over one storage: each has its own lock manager, as two isolates do.
  const sides = [new Counting(makeStore()), new Counting(makeStore())];
  const isolates = sides.map((side) => createKeyedSerializer({ store: side }));
  const fences = [];
  const alternate = async (i) => fences.push(await isolates[i % 2](`${key}-alt`, async (signal, turn) => turn.fence));
  // The first changes cost more: each isolate meets the record once (create refused) and
  // learns once that the other writes it too (a CAS on its remembered version refused).
  const warmUp = 4;
  for (let i = 0; i < warmUp; i++) await alternate(i);
  const coldCalls = sides[0].calls + sides[1].calls;
  const started = now();
  for (let i = warmUp; i < warmUp + alternations; i++) await alternate(i);
  const alternatingUs = ((now() - started) / alternations) * 1000;
  const rising = fences.every((fence, i) => i === 0 || fence > fences[i - 1]);
  return {
    localUs,
    sharedUs,
    sharedCallsPerWork,
    handUs,
    handCallsPerWork,
    alternatingUs,
    callsPerChange: (sides[0].calls + sides[1].calls - coldCalls) / alternations,
    coldCallsPerChange: coldCalls / warmUp,
    fencesRising: rising,
  };
}
