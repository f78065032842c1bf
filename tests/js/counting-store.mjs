// A MemoryStore that counts its calls (and its watches), with or without its `changed`: what
// the cross-isolate tests and benchmarks measure store calls with.
import { MemoryStore } from 'keyturn';

/** A MemoryStore counting every call; `tells` keeps or hides its `changed`. */
export function countingStore(tells) {
  const inner = new MemoryStore();
  const store = {
    calls: 0,
    watches: 0,
    create: (key, value) => (store.calls++, inner.create(key, value)),
    read: (key) => (store.calls++, inner.read(key)),
    replace: (key, version, value) => (store.calls++, inner.replace(key, version, value)),
  };
  if (tells) store.changed = (key, version, ms) => (store.calls++, store.watches++, inner.changed(key, version, ms));
  return store;
}
