// A level-triggered decision, as `keyed-serializer.js` (the per-key serializer keyturn re-implements) says of its own use ("grant or revoke its public
// read"): an object's source record says whether it is public, and a reconcile derives its ACL
// from a fresh read of the source. Each notification that the object changed asks for a
// reconcile; since a run decides from the source as it is when the run starts, the calls that
// wait at once share one run (`coalesce: true`) — a burst costs one run per reconcile in flight,
// not one per notification.
//
// The derived record carries the fence of the turn that wrote it, and is written conditionally
// on the etag read: an abandoned turn's late write is refused, as the notifications' is.
import { HttpError } from './http.js';
import { serializerFor } from './objects.js';

const sourceKey = (id) => `sources/${id}.json`;
const aclKey = (id) => `acls/${id}.json`;

/** Writes the object's source record: `{ id, public }`. */
export async function writeSource(env, id, isPublic) {
  const source = { id, public: isPublic };
  await env.BUCKET.put(sourceKey(id), JSON.stringify(source));
  return source;
}

/** The object's derived record, or `undefined`. */
export async function readAcl(env, id) {
  const object = await env.BUCKET.get(aclKey(id));
  return object ? object.json() : undefined;
}

/** A notification that the object changed: the derived record of the run that answered it. */
export function reconcile(env, id) {
  return serializerFor(env)(id, async (signal, turn) => {
    const source = await env.BUCKET.get(sourceKey(id));
    if (source === null) throw new HttpError(404, 'the object has no source');
    const { public: isPublic } = await source.json();
    const derived = await env.BUCKET.get(aclKey(id));
    const previous = derived ? await derived.json() : { runs: 0, fence: 0 };
    if (turn.fence < previous.fence) throw new HttpError(409, 'the ACL was written by a newer turn');
    const next = { id, public: isPublic, fence: turn.fence, runs: previous.runs + 1 };
    if (signal.aborted) throw new HttpError(503, 'timed out before writing; the next notification re-decides');
    const onlyIf = derived ? { etagMatches: derived.etag } : { etagDoesNotMatch: '*' };
    const written = await env.BUCKET.put(aclKey(id), JSON.stringify(next), { onlyIf });
    if (written === null) throw new HttpError(409, 'the ACL was written by a newer turn');
    return next;
  }, { coalesce: true });
}
