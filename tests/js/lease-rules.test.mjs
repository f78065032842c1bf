// The lease rules under faults in Node: two independent instances of the package (each its own
// module graph and wasm instances, as two isolates have) over one shared storage, running the
// scenarios of lease-scenarios.mjs. workerd-leases.test.mjs runs the same in two workerd isolates.
import { test } from 'node:test';

import { MapStore } from './map-store.mjs';
import { runOp } from './lease-ops.mjs';
import { SCENARIOS } from './lease-scenarios.mjs';

/** The package loaded once more: a module graph, and wasm instances, of its own. */
const instance = (name) => import(new URL(`../../pkg/node.mjs?instance=${name}`, import.meta.url));

/** A store whose version is the value itself: a write of the same bytes would bring a version back. */
class ValueStore {
  constructor(records) {
    this.records = records;
  }
  async create(key, value) {
    if (this.records.has(key)) return null;
    this.records.set(key, value);
    return value;
  }
  async read(key) {
    const value = this.records.get(key);
    return value === undefined ? null : { value, version: value };
  }
  async replace(key, version, value) {
    if (this.records.get(key) !== version) return null;
    this.records.set(key, value);
    return value;
  }
}

const shared = { plain: new Map(), values: new Map() };
const isolates = {};
for (const name of ['a', 'b']) {
  // Each isolate's own store objects over the shared storage, made once (a store object is
  // what a lock manager is kept by).
  const stores = { plain: new MapStore({ records: shared.plain }), values: new ValueStore(shared.values) };
  isolates[name] = { api: await instance(name), stores: (kind) => stores[kind] };
}

const run = (isolate, step) => runOp(isolates[isolate].api, isolates[isolate].stores, step);

for (const scenario of SCENARIOS) test(scenario.name, () => scenario.run(run, 'node'));
