// Bench worker for bench/workerd.mjs: N async works in one request, every caller awaiting its
// own result, with this package's serializer (workerd entry) or, when the bench bundled it as
// ./seed-serializer.mjs, the seed's.
import { createKeyedSerializer } from '../../pkg/workerd.js';
import { serializeMany } from '../../tests/workerd/limits-worker.mjs';

export default {
  async fetch(request) {
    const url = new URL(request.url);
    const works = Number(url.searchParams.get('works'));
    const keys = Number(url.searchParams.get('keys'));
    let create = createKeyedSerializer;
    if (url.searchParams.get('impl') === 'seed') {
      // The seed is CommonJS: esbuild's ESM bundle of it exports `module.exports` as default.
      const seed = await import('./seed-serializer.mjs');
      create = seed.createKeyedSerializer ?? seed.default.createKeyedSerializer;
    }
    return Response.json(await serializeMany(create, works, keys));
  },
};
