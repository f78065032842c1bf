// A counter per id on Deno Deploy: POST /<id> adds one, one turn at a time per id across every
// isolate sharing the Deno KV database; GET /<id> reads it. The lease and the count both live in
// Deno KV; the count's write is conditional on the versionstamp it read, as a fenced write.
import { createKeyedSerializer, DenoKvStore } from 'keyturn';

// Deno Deploy opens the project's database; locally, KV_PATH names a file (else Deno's default).
const kv = await Deno.openKv(Deno.env.get('KV_PATH'));
const serialize = createKeyedSerializer({ store: new DenoKvStore(kv), timeoutMs: 10_000 });

Deno.serve({ port: Number(Deno.env.get('PORT') ?? 8000) }, async (request) => {
  const id = new URL(request.url).pathname.slice(1) || 'default';
  if (request.method === 'GET') return Response.json({ count: (await kv.get<number>(['count', id])).value ?? 0 });
  if (request.method !== 'POST') return new Response('GET or POST', { status: 405 });
  const count = await serialize(id, async (signal) => {
    const entry = await kv.get<number>(['count', id]);
    const next = (entry.value ?? 0) + 1;
    if (signal.aborted) throw new Error('too late: the next turn re-decides');
    const { ok } = await kv.atomic().check(entry).set(['count', id], next).commit();
    if (!ok) throw new Error('written meanwhile');
    return next;
  }, { signal: request.signal });
  return Response.json({ id, count });
});
