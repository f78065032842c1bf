// The fault harness's Durable Objects engine: workerd (Miniflare) in this process holding the
// lock records and the fenced counters (faults/workerd/engine-worker.mjs), registered in a dev registry
// of its own so that every client process's workerd reaches the same objects. Its own fault: a
// client's isolate disposed while it holds a lease.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { Miniflare } from 'miniflare';

import { worker } from '../tests/runtimes/workerd.mjs';

const clientScript = fileURLToPath(new URL('./workerd-client-process.mjs', import.meta.url));
const ENGINE = 'keyturn-faults-engine';

export async function startDurableObjectsEngine({ lease, sleep, tell }) {
  const registry = mkdtempSync(join(tmpdir(), 'keyturn-faults-registry-'));
  const mf = new Miniflare({
    name: ENGINE,
    ...worker('faults/workerd/engine-worker.mjs'),
    cf: false,
    durableObjects: {
      LOCKS: { className: 'LockDurableObject', useSQLite: true },
      COUNTERS: { className: 'FencedCounter', useSQLite: true },
    },
    unsafeDevRegistryPath: registry,
  });
  await mf.ready;
  return {
    name: 'durable-objects',
    pids: [],
    async client() {
      return { script: clientScript, config: { registry, engine: ENGINE } };
    },
    faults: {
      async 'isolate disposed mid-hold'(slot) {
        tell(slot, 'SIGUSR2');
        await sleep(lease.staleMs);
      },
    },
    async finals(resources) {
      const finals = [];
      for (const resource of resources) {
        const response = await mf.dispatchFetch(`http://engine/final?resource=${encodeURIComponent(resource)}`);
        finals.push({ resource, ...(await response.json()) });
      }
      return finals;
    },
    async stop() {
      await mf.dispose();
      rmSync(registry, { recursive: true, force: true });
    },
  };
}
