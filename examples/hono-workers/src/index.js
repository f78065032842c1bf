// A Hono app on Workers: POST /counters/:id adds one to the id's counter, one turn at a time per
// id across every isolate; GET /counters/:id reads it. A middleware gives each request the
// isolate's serializer; the lease lives in a Durable Object, the count in R2.
import { Hono } from 'hono';
import { createKeyedSerializer, DurableObjectStore, SerializedWorkTimeout } from 'keyturn';
export { LockDurableObject } from 'keyturn'; // the class wrangler.toml binds

const app = new Hono();
let serializer; // one per isolate, made from the first request's env

app.use(async (c, next) => {
  serializer ??= createKeyedSerializer({ store: new DurableObjectStore(c.env.LOCKS), timeoutMs: 10_000 });
  c.set('serialize', serializer);
  await next();
});

app.get('/counters/:id', async (c) => c.json((await (await c.env.BUCKET.get(c.req.param('id')))?.json()) ?? { count: 0 }));

app.post('/counters/:id', async (c) => {
  const id = c.req.param('id');
  const count = await c.var.serialize(id, async (signal, turn) => {
    const object = await c.env.BUCKET.get(id);
    const state = object ? await object.json() : { count: 0, fence: 0 };
    if (signal.aborted || turn.fence < state.fence) throw new Error('too late: the next turn re-decides');
    const next = { count: state.count + 1, fence: turn.fence };
    const onlyIf = object ? { etagMatches: object.etag } : { etagDoesNotMatch: '*' };
    if ((await c.env.BUCKET.put(id, JSON.stringify(next), { onlyIf })) === null) throw new Error('written meanwhile');
    return next.count;
  }, { signal: c.req.raw.signal });
  return c.json({ id, count });
});

app.onError((error, c) => (error instanceof SerializedWorkTimeout ? c.json({ error: 'busy, try again' }, 503) : c.json({ error: String(error) }, 500)));

export default app;
