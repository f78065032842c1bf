// Run inside workerd (Miniflare) by tests/js/workerd-orphan.test.mjs: the "missing await" —
// a request that starts a serialized work, or takes a lock, and answers without waiting for it.
// workerd then ends that request's timers and I/O, so nothing in its context ever runs again;
// the requests after it must still be served. One isolate, serving every request:
//
// - GET /orphan?serializer=plain|store&key=K: starts a work on K — a fetch to the test's slow
//   upstream (http://upstream/, 300 ms) — and answers once the work has started (with a
//   store: once it holds the key's lease), never awaiting its end. With &waitUntil=1 it hands
//   the work's promise to ctx.waitUntil, which keeps the request's context until it settles:
//   the fix a user would make, the test's control.
// - GET /queue?serializer=…&key=K: a call on K that waits behind the work on it, never awaited:
//   the request answers at once, before the call's turn comes.
// - GET /call?serializer=…&key=K: an awaited call on K; answers its value, or its error.
// - GET /stats?serializer=…&key=K: that serializer's stats and the key's pending works.
// - GET /hold?name=N: acquireLock over the Durable Object store, answered without releasing.
// - GET /take?name=N&waitMs=W: acquireLock of N waiting up to W ms; released at once if taken.
// - GET /locks: lockStats of the store.
import { acquireLock, createKeyedSerializer, DurableObjectStore, lockStats } from '../../pkg/workerd.js';

export { LockDurableObject } from '../../pkg/workerd.js';

// The orphan's deadline, and the lease of every lock and turn here: no longer than the deadline,
// so that a turn's lease ends within the test's bound whether the orphan's turn releases it at
// its deadline or leaves it to lapse.
const TIMEOUT_MS = 1000;
const STALE_MS = 1000;
// The awaited calls' own deadline: longer than anything the orphan can hold its key for, so that
// only the orphan decides how long they wait (the test's bound is the contract, not this).
const CALL_TIMEOUT_MS = 5000;

// This isolate's store, made on the first request, and a serializer per case (a mode and a key),
// so that each case's stats are its own.
let lockStore;
const serializers = new Map();
function serializerFor(mode, key) {
  let serialize = serializers.get(`${mode}:${key}`);
  if (serialize === undefined) {
    serialize = mode === 'store' ? createKeyedSerializer({ store: lockStore, timeoutMs: TIMEOUT_MS, staleMs: STALE_MS }) : createKeyedSerializer({ timeoutMs: TIMEOUT_MS });
    serializers.set(`${mode}:${key}`, serialize);
  }
  return serialize;
}

const describeError = (error) => ({ name: error?.name, message: String(error?.message ?? error) });

export default {
  async fetch(request, env, ctx) {
    const url = new URL(request.url);
    const query = (name) => url.searchParams.get(name);
    lockStore ??= new DurableObjectStore(env.LOCKS, { prefix: 'orphan:' });
    if (url.pathname === '/locks') return Response.json({ locks: lockStats(lockStore) });
    const name = query('name');
    if (url.pathname === '/hold') {
      // The mistake: an early answer that skips `release()`.
      const lock = await acquireLock(lockStore, name, { staleMs: STALE_MS });
      return Response.json({ held: lock !== undefined, fence: lock?.fence });
    }
    if (url.pathname === '/take') {
      try {
        const lock = await acquireLock(lockStore, name, { staleMs: STALE_MS, waitMs: Number(query('waitMs')) });
        if (lock === undefined) return Response.json({ held: false, locks: lockStats(lockStore) });
        const fence = lock.fence;
        await lock.release();
        return Response.json({ held: true, fence });
      } catch (error) {
        return Response.json({ error: describeError(error), locks: lockStats(lockStore) }, { status: 500 });
      }
    }

    const key = query('key');
    if (key === null) return new Response(`no route ${url.pathname}`, { status: 404 });
    const serialize = serializerFor(query('serializer') ?? 'plain', key);

    if (url.pathname === '/orphan') {
      let started;
      const running = new Promise((resolve) => {
        started = resolve;
      });
      // The mistake: no await, no catch. The work awaits I/O of this request, which ends when
      // this request answers.
      const work = serialize(key, async (signal) => {
        started();
        const response = await fetch(`http://upstream/slow?key=${encodeURIComponent(key)}`, { signal });
        return response.text();
      });
      if (query('waitUntil') === '1') ctx.waitUntil(work);
      await running;
      return Response.json({ started: true, stats: serialize.stats() });
    }
    if (url.pathname === '/queue') {
      // The mistake again, on a busy key: the call's turn comes after this request ended.
      serialize(key, async () => 'the queued work ran');
      return Response.json({ queued: true, pending: serialize.pending(key) });
    }
    if (url.pathname === '/call') {
      try {
        const value = await serialize(key, async () => `served ${query('n')}`, { timeoutMs: CALL_TIMEOUT_MS });
        return Response.json({ value, stats: serialize.stats(), pending: serialize.pending(key) });
      } catch (error) {
        return Response.json({ error: describeError(error), stats: serialize.stats() }, { status: 500 });
      }
    }
    if (url.pathname === '/stats') return Response.json({ stats: serialize.stats(), pending: serialize.pending(key) });
    return new Response(`no route ${url.pathname}`, { status: 404 });
  },
};
