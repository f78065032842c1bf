// What the tests of a pace across isolates share: works that log when they start and end on the
// epoch clock (every process here reads one machine's clock), and the checks of such a log.

/** Epoch milliseconds with the monotonic clock's fraction. */
export const epochMs = () => performance.timeOrigin + performance.now();

/** `count` works of `key` on `serialize`, all called at once, each awaited by its own caller;
 * each reports `{ start, end }` to `log` (awaited before it ends). Resolves when all settled. */
export async function pacedWorks(serialize, key, count, log, holdMs = 3) {
  await Promise.all(Array.from({ length: count }, () => serialize(key, async () => {
    const start = epochMs();
    await new Promise((resolve) => setTimeout(resolve, holdMs));
    await log({ start, end: epochMs() });
  })));
}

/** Held to the pace and the turn: no `limit + 1` starts within `periodMs` (less
 * `allowanceMs` for the clocks), no two works overlapping. The starts, sorted. */
export function checkPaced(events, { limit, periodMs, allowanceMs }) {
  const sorted = [...events].sort((x, y) => x.start - y.start);
  for (let i = 0; i + limit < sorted.length; i++) {
    const span = sorted[i + limit].start - sorted[i].start;
    if (span < periodMs - allowanceMs) throw new Error(`${limit + 1} starts within ${span.toFixed(1)} ms (starts ${i}…${i + limit})`);
  }
  for (let i = 1; i < sorted.length; i++) {
    if (sorted[i].start < sorted[i - 1].end - allowanceMs) throw new Error(`works ${i - 1} and ${i} overlap`);
  }
  return sorted.map((event) => event.start);
}
