// A board whose lane allows LANE_LIMIT cards in progress. A claim reads the board, checks the
// lane and writes it back — under the board's lock, so two claims never both see a free slot.
// The write also carries the lock's fence: the board remembers the highest fence that wrote
// it and refuses an older one, and the write is a conditional put on the etag that was read,
// so a holder that was taken over (it outlived staleMs) cannot land a late write.
import { withLock } from 'keyturn';

import { lockOptions, lockStore } from './locks.js';

export const LANE_LIMIT = 3;

const boardKey = (board) => `boards/${board}.json`;

export async function readBoard(env, board) {
  const object = await env.BUCKET.get(boardKey(board));
  if (!object) return { board: { id: board, inProgress: [], fence: 0 }, etag: null };
  return { board: await object.json(), etag: object.etag };
}

/**
 * Writes the board if `fence` is not older than `lastFence` (the fence that wrote what was
 * read) and nobody wrote it since it was read (a conditional put on its etag). Answers whether
 * it was written.
 */
export async function writeBoard(env, board, fence, etag, lastFence) {
  if (fence < lastFence) return false;
  const onlyIf = etag === null ? { etagDoesNotMatch: '*' } : { etagMatches: etag };
  const written = await env.BUCKET.put(boardKey(board.id), JSON.stringify({ ...board, fence }), { onlyIf });
  return written !== null;
}

/**
 * 201 with the card and fence, 409 when the lane is full (or a newer holder wrote the board);
 * `withLock` renews the lease while the claim runs and rejects with `LockUnavailable` (a 503)
 * when the board's lock was not had within the wait.
 */
export function claim(env, boardId, card) {
  return withLock(lockStore(env), `board:${boardId}`, async (lock) => {
    const { board, etag } = await readBoard(env, boardId);
    if (board.inProgress.includes(card)) return { status: 200, body: { card, fence: lock.fence, already: true } };
    if (board.inProgress.length >= LANE_LIMIT) return { status: 409, body: { error: 'the lane is full', limit: LANE_LIMIT } };
    const next = { ...board, inProgress: [...board.inProgress, card] };
    if (!(await writeBoard(env, next, lock.fence, etag, board.fence))) {
      return { status: 409, body: { error: 'the board was written by a newer holder of its lock' } };
    }
    return { status: 201, body: { card, fence: lock.fence } };
  }, lockOptions(env));
}
