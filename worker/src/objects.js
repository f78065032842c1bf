// Webhook notifications about objects: each is handled one at a time per object within this
// isolate (the keyed serializer, which gives each its deadline), and under the object's lock
// across isolates (`withLock`, over the isolate's one store, renewing the lease while it runs).
// The handler reads the object's state, applies the notification, and writes it back with the
// lock's fence: a conditional put on the etag it read, refused when the object was written by a
// newer holder — so nothing is lost when notifications about one object arrive concurrently,
// and a holder that lost its lease cannot land a late write.
import { createKeyedSerializer, withLock } from 'keyturn';

import { HttpError } from './http.js';
import { lockStore } from './locks.js';

const serialize = createKeyedSerializer({ timeoutMs: 10000 });
const objectKey = (id) => `objects/${id}.json`;

export function notify(env, id, delta) {
  return serialize(id, (signal) =>
    withLock(lockStore(env), `object:${id}`, async (lock) => {
      const object = await env.BUCKET.get(objectKey(id));
      const state = object ? await object.json() : { id, total: 0, notifications: 0, fence: 0 };
      if (lock.fence < (state.fence ?? 0)) throw new HttpError(409, 'the object was written by a newer holder of its lock');
      const total = state.total + delta;
      // Past 2^53 - 1 a sum is no longer exact: refused, and nothing is written.
      if (!Number.isSafeInteger(total)) throw new HttpError(422, 'the total would leave the exact integers');
      const next = { ...state, total, notifications: state.notifications + 1, fence: lock.fence };
      if (signal.aborted) throw new HttpError(503, 'timed out before writing; the next notification re-decides');
      const onlyIf = object ? { etagMatches: object.etag } : { etagDoesNotMatch: '*' };
      if ((await env.BUCKET.put(objectKey(id), JSON.stringify(next), { onlyIf })) === null) {
        throw new HttpError(409, 'the object was written by a newer holder of its lock');
      }
      return next;
    }, { waitMs: 10000, signal }),
  );
}
