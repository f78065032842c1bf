// Webhook notifications about objects: each is handled one at a time per object within this
// isolate (the keyed serializer), and under the object's lock across isolates. The handler reads
// the object's state, applies the notification, and writes it back; nothing is lost when
// notifications about one object arrive concurrently.
import { acquireLock, createKeyedSerializer, DurableObjectStore } from 'keyturn';

import { HttpError } from './http.js';

const serialize = createKeyedSerializer({ timeoutMs: 10000 });
const objectKey = (id) => `objects/${id}.json`;

export async function notify(env, id, delta) {
  return serialize(id, async (signal) => {
    const lock = await acquireLock(new DurableObjectStore(env.LOCKS), `object:${id}`, { waitMs: 10000 });
    if (!lock) throw new HttpError(503, 'the object is busy; try again', { 'retry-after': '1' });
    try {
      const object = await env.BUCKET.get(objectKey(id));
      const state = object ? await object.json() : { id, total: 0, notifications: 0 };
      const next = { ...state, total: state.total + delta, notifications: state.notifications + 1, fence: lock.fence };
      if (signal.aborted) throw new HttpError(503, 'timed out before writing; the next notification re-decides');
      await env.BUCKET.put(objectKey(id), JSON.stringify(next));
      return next;
    } finally {
      await lock.release();
    }
  });
}
