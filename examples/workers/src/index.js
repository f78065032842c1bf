// A counter per id, one turn at a time per id across every isolate of the Worker: POST /<id>
// adds one, GET /<id> reads it. The turn's lease lives in a Durable Object; the count in R2.
import { createKeyedSerializer, DurableObjectStore } from 'keyturn';
export { LockDurableObject } from 'keyturn'; // the class wrangler.toml binds

let serialize; // one per isolate, made from the first request's env

export default {
  async fetch(request, env) {
    serialize ??= createKeyedSerializer({ store: new DurableObjectStore(env.LOCKS), timeoutMs: 10_000 });
    const id = new URL(request.url).pathname.slice(1) || 'default';
    if (request.method === 'GET') return Response.json((await (await env.BUCKET.get(id))?.json()) ?? { count: 0 });
    if (request.method !== 'POST') return new Response('GET or POST', { status: 405 });
    const count = await serialize(id, async (signal, turn) => {
      const object = await env.BUCKET.get(id); // read, decide, write: nobody else holds the id
      const state = object ? await object.json() : { count: 0, fence: 0 };
      // A turn that outlived its lease writes nothing: the fence and the etag both refuse it.
      if (signal.aborted || turn.fence < state.fence) throw new Error('too late: the next turn re-decides');
      const next = { count: state.count + 1, fence: turn.fence };
      const onlyIf = object ? { etagMatches: object.etag } : { etagDoesNotMatch: '*' };
      if ((await env.BUCKET.put(id, JSON.stringify(next), { onlyIf })) === null) throw new Error('written meanwhile');
      return next.count;
    }, { signal: request.signal });
    return Response.json({ id, count });
  },
};
