// The fault harness's Durable Objects engine: workerd (Miniflare) in this process holding the
// lock records and the fenced counters (faults/workerd/engine-worker.mjs), registered in a dev
// registry of its own so that every client process's workerd reaches the same objects. Its
// fault: a client's isolate disposed while it holds a lease. Its store fault: the engine's
// workerd killed and started again on its persisted storage (the counters' objects persist
// with the locks', so what the checker reads outlives it).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { Miniflare } from 'miniflare';

import { worker } from '../tests/runtimes/workerd.mjs';
import { childrenNamed } from './processes.mjs';

const clientScript = fileURLToPath(new URL('./workerd-client-process.mjs', import.meta.url));
const ENGINE = 'keyturn-faults-engine';

export async function startDurableObjectsEngine({ lease, sleep, tell, track }) {
  const registry = mkdtempSync(join(tmpdir(), 'keyturn-faults-registry-'));
  const storage = mkdtempSync(join(tmpdir(), 'keyturn-faults-storage-'));
  const options = {
    name: ENGINE,
    ...worker('faults/workerd/engine-worker.mjs'),
    cf: false,
    durableObjects: {
      LOCKS: { className: 'LockDurableObject', useSQLite: true },
      COUNTERS: { className: 'FencedCounter', useSQLite: true },
    },
    durableObjectsPersist: storage,
    unsafeDevRegistryPath: registry,
  };
  /** Starts the engine's workerd: its PIDs are this process's workerd children (the clients' are theirs). */
  const start = async () => {
    const mf = new Miniflare(options);
    await mf.ready;
    for (const pid of childrenNamed(process.pid, 'workerd')) track(pid, 'workerd');
    return mf;
  };
  let mf = await start();
  return {
    name: 'durable-objects',
    async client() {
      return { script: clientScript, config: { registry, engine: ENGINE } };
    },
    faults: {
      async 'isolate disposed mid-hold'(slot) {
        tell(slot, 'SIGUSR2');
        await sleep(lease.staleMs);
      },
    },
    storeFaults: {
      async 'workerd killed, storage kept'() {
        for (const pid of childrenNamed(process.pid, 'workerd')) process.kill(pid, 'SIGKILL');
        await mf.dispose().catch(() => {});
        await sleep(lease.maxClockSkewMs + 20);
        mf = await start();
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
      rmSync(storage, { recursive: true, force: true });
    },
  };
}
