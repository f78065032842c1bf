// The example worker: a board whose lane allows 3 cards in progress, and webhooks about objects.
//
//   POST /boards/:board/claims        {"card": "<id>"} → 201 {card, fence} | 409 | 503 + Retry-After
//   GET  /boards/:board               → the board
//   POST /objects/:id/notifications   {"delta": <integer>} → the object's state after it
//   PUT  /objects/:id/source          {"public": true|false} → 200 {id, public}
//   POST /objects/:id/reconcile       (any body) → 200 the ACL derived by the run that answered it
//   GET  /objects/:id/acl             → the derived ACL {id, public, fence, runs}, or 404
//   POST /tenants/:tenant/exports     → 200 {tenant, slot, fence, upstreamMs, upstream} — at most
//                                       2 exports per tenant reach the upstream at once | 503
//   GET  /tenants/:tenant/search?q=…  → 200 {tenant, query, slot, waitedMs, upstreamMs, upstream} — at
//                                       most 5 searches per tenant start per second, 2 at once, in
//                                       order of arrival, in every isolate | 503
//        …&wait=0                     → the same if it can start now, else 429 + Retry-After
//
// Bad input gets a 4xx with a JSON error, and nothing is written.
import { LockDurableObject, LockStoreError, LockUnavailable, SerializedQueueFull, SerializedWorkTimeout, SerializedWorkUnavailable } from 'keyturn';

import { claim, readBoard, writeBoard } from './board.js';
import { checkId, HttpError, json, readJson } from './http.js';
import { notify } from './objects.js';
import { readAcl, reconcile, writeSource } from './acl.js';
import { exportFor } from './exports.js';
import { searchFor } from './searches.js';

export { LockDurableObject };

const routes = [
  [/^\/boards\/([^/]+)\/claims$/, { POST: claimRoute }],
  [/^\/boards\/([^/]+)$/, { GET: boardRoute }],
  [/^\/objects\/([^/]+)\/notifications$/, { POST: notificationRoute }],
  [/^\/objects\/([^/]+)\/source$/, { PUT: sourceRoute }],
  [/^\/objects\/([^/]+)\/reconcile$/, { POST: reconcileRoute }],
  [/^\/objects\/([^/]+)\/acl$/, { GET: aclRoute }],
  [/^\/tenants\/([^/]+)\/exports$/, { POST: exportRoute }],
  [/^\/tenants\/([^/]+)\/search$/, { GET: searchRoute }],
];

async function claimRoute(request, env, [board]) {
  checkId(board, 'board');
  const body = await readJson(request);
  if (typeof body.card !== 'string') throw new HttpError(400, 'card must be a string');
  const card = checkId(body.card, 'card');
  const { status, body: reply } = await claim(env, board, card);
  return json(status, reply);
}

async function boardRoute(request, env, [board]) {
  checkId(board, 'board');
  const { board: state } = await readBoard(env, board);
  return json(200, state);
}

async function notificationRoute(request, env, [id]) {
  checkId(id, 'object id');
  const body = await readJson(request);
  if (!Number.isSafeInteger(body.delta)) throw new HttpError(400, 'delta must be an integer');
  return json(200, await notify(env, id, body.delta));
}

async function sourceRoute(request, env, [id]) {
  checkId(id, 'object id');
  const body = await readJson(request);
  if (typeof body.public !== 'boolean') throw new HttpError(400, 'public must be true or false');
  return json(200, await writeSource(env, id, body.public));
}

// The body of a notification that the object changed says nothing the run does not read.
async function reconcileRoute(request, env, [id]) {
  checkId(id, 'object id');
  return json(200, await reconcile(env, id));
}

async function aclRoute(request, env, [id]) {
  checkId(id, 'object id');
  const acl = await readAcl(env, id);
  if (acl === undefined) throw new HttpError(404, 'the object has no ACL yet');
  return json(200, acl);
}

async function exportRoute(request, env, [tenant]) {
  checkId(tenant, 'tenant');
  return json(200, await exportFor(env, tenant));
}

const MAX_QUERY = 256;

async function searchRoute(request, env, [tenant]) {
  checkId(tenant, 'tenant');
  const params = new URL(request.url).searchParams;
  const query = params.get('q') ?? '';
  if (query.length > MAX_QUERY) throw new HttpError(400, `q must be at most ${MAX_QUERY} characters`);
  const wait = params.get('wait') ?? '1';
  if (wait !== '0' && wait !== '1') throw new HttpError(400, 'wait must be 0 or 1');
  return json(200, await searchFor(env, tenant, query, wait === '0'));
}

// Off unless the TEST_HOOKS var is "1" (the tests set it): a holder's late write, as a holder
// that was taken over would make it, to show the board refusing it by fence.
async function lateWriteRoute(request, env, [board]) {
  const { fence, card } = await readJson(request);
  const { board: state, etag } = await readBoard(env, board);
  const written = await writeBoard(env, { ...state, inProgress: [...state.inProgress, card] }, fence, etag, state.fence);
  return json(written ? 200 : 409, { written });
}

export default {
  async fetch(request, env) {
    const { pathname } = new URL(request.url);
    try {
      const hooks = env.TEST_HOOKS === '1' ? [[/^\/test\/boards\/([^/]+)\/late-write$/, { POST: lateWriteRoute }]] : [];
      for (const [pattern, methods] of [...routes, ...hooks]) {
        const match = pattern.exec(pathname);
        if (!match) continue;
        const handler = methods[request.method];
        if (!handler) throw new HttpError(405, `${request.method} is not allowed here`, { allow: Object.keys(methods).join(', ') });
        return await handler(request, env, match.slice(1).map(decodeURIComponent));
      }
      throw new HttpError(404, 'no such route');
    } catch (error) {
      if (error instanceof HttpError) return json(error.status, { error: error.message }, error.headers);
      if (error instanceof LockUnavailable) return json(503, { error: 'busy; try again' }, { 'retry-after': '1' });
      // Refused at once by `?wait=0`: how long until the pace allows a start when the pace is
      // what held it up (Retry-After in whole seconds, rounded up; the body's in ms), else a guess.
      if (error instanceof SerializedWorkUnavailable) {
        const retry = error.retryAfterMs === undefined ? 1 : Math.max(1, Math.ceil(error.retryAfterMs / 1000));
        return json(429, { error: 'busy; try again', retryAfterMs: error.retryAfterMs ?? null }, { 'retry-after': String(retry) });
      }
      if (error instanceof SerializedQueueFull) return json(503, { error: 'too many waiting; try again' }, { 'retry-after': '1' });
      if (error instanceof SerializedWorkTimeout) return json(503, { error: error.message }, { 'retry-after': '1' });
      if (error instanceof LockStoreError) return json(503, { error: 'the lock store failed' }, { 'retry-after': '1' });
      if (error instanceof URIError) return json(400, { error: 'the path is not valid' });
      throw error;
    }
  },
};
