// A counter per key, kept by a read, a round trip and a write: without a turn per key, requests
// that arrive together all read the same count and all but one of their increments are lost.
import { createKeyedSerializer } from 'keyturn';

// One serializer per isolate, at module scope: every request the isolate serves shares it.
const serialize = createKeyedSerializer({ timeoutMs: 5_000 });

// Stands in for a database; with many isolates, give the serializer a store (see the docs).
const counts = new Map();
const roundTrip = () => new Promise((resolve) => setTimeout(resolve, 2));

/** Adds one to `key`'s count, one request at a time per key; the count it wrote. */
export function increment(key) {
  return serialize(key, async (signal) => {
    const count = counts.get(key) ?? 0;
    await roundTrip();
    if (signal.aborted) return count; // past the deadline: write nothing
    counts.set(key, count + 1);
    return count + 1;
  });
}
