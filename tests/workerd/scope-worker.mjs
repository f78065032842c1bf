// Run inside workerd (Miniflare) by tests/js/workerd-scope.test.mjs, with nodejs_compat and
// without: a serializer without a store says once that it orders keys in one isolate only,
// unless made with scope: 'isolate' or with a store; and tracing publishes where the isolate has
// node:diagnostics_channel.
//
// - GET /plain, /isolate, /store: two calls of that route's serializer (made once per isolate).
// - GET /mark?text=T: logs T (console.warn), so the test knows every line before it arrived.
// - GET /trace: a call of a serializer over the Durable Objects, with every turn and store
//   channel subscribed in this request: what they published, or { available: false }.
import { DurableObjectStore, createKeyedSerializer } from '../../pkg/workerd.js';

export { LockDurableObject } from '../../pkg/workerd.js';

const plain = createKeyedSerializer();
const isolate = createKeyedSerializer({ scope: 'isolate' });
let stored;

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    if (url.pathname === '/mark') {
      console.warn(url.searchParams.get('text'));
      return new Response('ok');
    }
    if (url.pathname === '/trace') return Response.json(await trace(env));
    stored ??= createKeyedSerializer({ store: new DurableObjectStore(env.LOCKS) });
    const serialize = { '/plain': plain, '/isolate': isolate, '/store': stored }[url.pathname];
    const values = [await serialize('k', () => 1), await serialize('k', () => 2)];
    return Response.json(values);
  },
};

async function trace(env) {
  const diagnostics = globalThis.process?.getBuiltinModule?.('node:diagnostics_channel');
  if (diagnostics === undefined) return { available: false };
  const seen = [];
  const names = ['keyturn:turn:wait', 'keyturn:turn:start', 'keyturn:turn:end', 'keyturn:store'];
  const subscribers = names.map((name) => [name, (message) => seen.push({ channel: name, ...message, error: message.error === undefined ? undefined : String(message.error) })]);
  for (const [name, subscriber] of subscribers) diagnostics.subscribe(name, subscriber);
  try {
    stored ??= createKeyedSerializer({ store: new DurableObjectStore(env.LOCKS) });
    const fence = await stored('traced', async (_, turn) => turn.fence);
    return { available: true, fence, seen };
  } finally {
    for (const [name, subscriber] of subscribers) diagnostics.unsubscribe(name, subscriber);
  }
}
