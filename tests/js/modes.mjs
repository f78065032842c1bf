// The package's modules as one graph — what pkg/node.mjs bundles into one file — and the
// primitives each kind of entry makes from them: `direct` (Node, browsers, Deno, bundlers) and
// `workers` (the workerd entry: each work started from its own caller's reaction with a deadline
// timer of its own, lock waiters with timers of their own). A serializer test file defines its
// tests once, in `forEachMode`, and they run in both. Tests that reach inside (fault injection
// patching an engine's prototype) use the engines exported here.
import { describe } from 'node:test';
import { readFileSync } from 'node:fs';

import { initSync } from '../../pkg/keyturn_wasm.js';
import { platformApi } from '../../pkg/platform.js';
import * as api from '../../pkg/api.js';

initSync({ module: readFileSync(new URL('../../pkg/keyturn_wasm_bg.wasm', import.meta.url)) });
const loadLock = (lock) => lock.initSync({ module: readFileSync(new URL('../../pkg/keyturn_lock_bg.wasm', import.meta.url)) });

/** Each mode: its name, and the package's exports as its entry makes them. */
export const MODES = [
  { name: 'direct', ...api, ...platformApi({ loadLock }) },
  { name: 'workers', ...api, ...platformApi({ loadLock, inContext: true }) },
];

/** Defines a file's tests once per mode, each mode in a suite of its own name. */
export function forEachMode(define) {
  for (const mode of MODES) describe(mode.name, () => define(mode));
}

export { Engine as SerializerEngine } from '../../pkg/keyturn_wasm.js';
export { Engine as LockEngine } from '../../pkg/keyturn_lock.js';
