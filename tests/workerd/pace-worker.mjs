// Run inside workerd (Miniflare) by tests/js/workerd-pace.test.mjs: a key's pace when each call
// is its own request — what a Worker meets. One isolate; a serializer at 3 starts per 300 ms, and two
// whose works fetch:
//
// - GET /call?key=K: an awaited call on K; answers when its work started (Date.now(), which
//   workerd moves across I/O and timers), as the work read it.
// - GET /try?key=K: the same with ifAvailable; answers its error's name and retryAfterMs if it
//   was refused.
// - GET /stats: the serializer's stats.
// - GET /fetch?key=K&n=N: an awaited call on K of a serializer at N at a time and N starts per
//   second, whose work fetches UPSTREAM (a binding: the test's loopback server); answers when
//   it started and what the upstream said.
import { createKeyedSerializer } from '../../pkg/workerd.js';

const serialize = createKeyedSerializer({ rate: { limit: 3, periodMs: 300 } });
const fetching = [1, 2].map((n) => createKeyedSerializer({ rate: { limit: n, periodMs: 1000 }, concurrency: n, timeoutMs: 10_000 }));

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const key = url.searchParams.get('key') ?? 'k';
    if (url.pathname === '/stats') return Response.json(serialize.stats());
    if (url.pathname === '/fetch') {
      const paced = fetching[Number(url.searchParams.get('n')) - 1];
      const answer = await paced(key, async (signal) => {
        const started = Date.now();
        const response = await fetch(`${env.UPSTREAM}/?key=${key}`, { signal });
        return { started, upstream: await response.text() };
      });
      return Response.json(answer);
    }
    const options = url.pathname === '/try' ? { ifAvailable: true } : undefined;
    try {
      const started = await serialize(key, async () => Date.now(), options);
      return Response.json({ started });
    } catch (error) {
      return Response.json({ error: error.name, retryAfterMs: error.retryAfterMs ?? null });
    }
  },
};
