// A workerd client of the fault harness, one per client process (faults/workerd-client-process.mjs):
// its own keyturn instance in its own isolate, over the engine's Durable Objects (bindings LOCKS
// and COUNTERS, reached through the dev registry). `POST /turn?name=…` takes one turn. Its events
// go out one by one as requests to the process driving it (Miniflare's outbound service), each
// awaited: an event is on record before the step after it is sent, even if the isolate is
// disposed or the process killed right after.
//
// Its times: `Date.now()` (the machine's wall clock, which in workerd moves only across I/O, so
// it reads when the last answer came) less CONFIG.offsetMs, the wall clock's distance from the
// machine's monotonic clock that every process of the harness shares.
import { DurableObjectStore, SERIALIZE_PREFIX, createKeyedSerializer, withLock } from '../../pkg/workerd.js';
import { clientStore, makeSerializer, makeTurn } from '../turn.mjs';

/** Records an event with the driving process; a driver gone meanwhile loses it. */
const emit = (event) => fetch('http://history/', { method: 'POST', body: JSON.stringify(event) }).then(() => {}, () => {});

let clientId; // this isolate's client, known at its first request

addEventListener('unhandledrejection', (event) => {
  emit({ kind: 'crash', client: clientId ?? 'workerd', detail: `unhandled rejection: ${event.reason?.stack ?? event.reason}` });
});

let turn;

function setUp(env) {
  const config = env.CONFIG;
  clientId = config.id;
  const api = { withLock, createKeyedSerializer };
  const real = () => Date.now() - config.offsetMs;
  const store = clientStore(new DurableObjectStore(env.LOCKS), config, { emit, real, serializePrefix: SERIALIZE_PREFIX });
  const counters = env.COUNTERS;
  const write = async (resource, fence, token) => {
    try {
      return (await counters.get(counters.idFromName(resource)).increment(fence, token)) ? 'ok' : 'refused';
    } catch {
      return 'info'; // its answer was lost: it may or may not have applied
    }
  };
  return makeTurn({
    api,
    store,
    serialize: makeSerializer(api, store, config),
    write,
    real,
    now: () => Date.now() + config.skewMs,
    emit,
    config,
  });
}

export default {
  async fetch(request, env) {
    turn ??= setUp(env);
    const name = new URL(request.url).searchParams.get('name');
    try {
      await turn(name);
    } catch (error) {
      await emit({ kind: 'failed', client: env.CONFIG.id, name, error: error?.name ?? String(error) });
    }
    return new Response(null, { status: 204 });
  },
};
