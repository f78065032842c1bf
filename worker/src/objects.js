// Webhook notifications about objects: one `serialize(id, work)` per notification, over the
// isolate's Durable Object lock store — so notifications about one object run one at a time in
// every isolate of the deployment, each with its deadline (waiting for the object's turn and
// running), its lease renewed while it runs, and a fence that rises with every turn.
//
// A turn reads the object, applies the notification and writes it back with the turn's fence:
// a conditional put on the etag it read, refused when the object was written since — so nothing
// is lost when notifications about one object arrive concurrently, and a work whose turn was
// abandoned cannot land a late write.
import { createKeyedSerializer } from 'keyturn';

import { HttpError } from './http.js';
import { lockStore } from './locks.js';

const serializers = new WeakMap();
const objectKey = (id) => `objects/${id}.json`;

/** The isolate's serializer over its lock store (made once, from the first request's `env`). */
export function serializerFor(env) {
  const store = lockStore(env);
  let serialize = serializers.get(store);
  if (serialize === undefined) {
    serialize = createKeyedSerializer({ store, timeoutMs: 10000, staleMs: Number(env.LOCK_STALE_MS ?? 2000) });
    serializers.set(store, serialize);
  }
  return serialize;
}

export function notify(env, id, delta) {
  return serializerFor(env)(id, async (signal, turn) => {
    const object = await env.BUCKET.get(objectKey(id));
    const state = object ? await object.json() : { id, total: 0, notifications: 0, fence: 0 };
    if (turn.fence < state.fence) throw new HttpError(409, 'the object was written by a newer turn');
    const total = state.total + delta;
    // Past 2^53 - 1 a sum is no longer exact: refused, and nothing is written.
    if (!Number.isSafeInteger(total)) throw new HttpError(422, 'the total would leave the exact integers');
    const next = { ...state, total, notifications: state.notifications + 1, fence: turn.fence };
    if (signal.aborted) throw new HttpError(503, 'timed out before writing; the next notification re-decides');
    const onlyIf = object ? { etagMatches: object.etag } : { etagDoesNotMatch: '*' };
    const written = await env.BUCKET.put(objectKey(id), JSON.stringify(next), { onlyIf });
    if (written === null) throw new HttpError(409, 'the object was written by a newer turn');
    return next;
  });
}
