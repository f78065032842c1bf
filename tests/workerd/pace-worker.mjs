// Run inside workerd (Miniflare) by tests/js/workerd-pace.test.mjs: a key's pace when each call
// is its own request — what a Worker meets. One isolate, one serializer at 3 starts per 300 ms:
//
// - GET /call?key=K: an awaited call on K; answers when its work started (Date.now(), which
//   workerd moves across I/O and timers), as the work read it.
// - GET /try?key=K: the same with ifAvailable; answers its error's name and retryAfterMs if it
//   was refused.
// - GET /stats: the serializer's stats.
import { createKeyedSerializer } from '../../pkg/workerd.js';

const serialize = createKeyedSerializer({ rate: { limit: 3, periodMs: 300 } });

export default {
  async fetch(request) {
    const url = new URL(request.url);
    const key = url.searchParams.get('key') ?? 'k';
    if (url.pathname === '/stats') return Response.json(serialize.stats());
    const options = url.pathname === '/try' ? { ifAvailable: true } : undefined;
    try {
      const started = await serialize(key, async () => Date.now(), options);
      return Response.json({ started });
    } catch (error) {
      return Response.json({ error: error.name, retryAfterMs: error.retryAfterMs ?? null });
    }
  },
};
