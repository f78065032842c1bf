// Bench worker for bench/workerd.mjs: N async works in one request, every caller awaiting its
// own result — or, with `?one=KEY`, one call per request — with this package's serializer (workerd entry), or, when the bench bundled it as
// ./seed-serializer.mjs, keyed-serializer.js's — or one of two floors: a bare promise chain with one
// AbortController per work (`floor`), and the same with one deadline timer per work, armed when
// it starts and cleared when it settles (`floor-timer`: what any serializer pays on Workers
// whose works each get a real deadline, since a timer armed in one request's context does not
// outlive that request, so works of different requests cannot share one).
import { createKeyedSerializer } from '../../pkg/workerd.js';
import { serializeMany } from '../../tests/workerd/limits-worker.mjs';
import { bareChain } from './bare-chain.mjs';

// One serializer for the isolate, as a worker holds it: `?one=KEY` is one request's one call.
const perRequest = createKeyedSerializer({ scope: 'isolate' });
const asyncWork = async () => {};

export default {
  async fetch(request) {
    const url = new URL(request.url);
    const one = url.searchParams.get('one');
    if (one !== null) {
      // `impl=none`: the request alone, the floor of a request that calls the serializer.
      if (url.searchParams.get('impl') !== 'none') await perRequest(one, asyncWork);
      return new Response('ok');
    }
    const works = Number(url.searchParams.get('works'));
    const keys = Number(url.searchParams.get('keys'));
    let create = createKeyedSerializer;
    if (url.searchParams.get('impl') === 'floor') create = () => bareChain();
    if (url.searchParams.get('impl') === 'floor-timer') create = ({ timeoutMs }) => bareChain({ timeoutMs });
    if (url.searchParams.get('impl') === 'seed') {
      // keyed-serializer.js is CommonJS: esbuild's ESM bundle of it exports `module.exports` as default.
      const seed = await import('./seed-serializer.mjs');
      create = seed.createKeyedSerializer ?? seed.default.createKeyedSerializer;
    }
    return Response.json(await serializeMany(create, works, keys));
  },
};
