// One client process of the fault harness over Durable Objects: a workerd (Miniflare) of its
// own running faults/workerd/client-worker.mjs — its own keyturn instance — whose bindings LOCKS and
// COUNTERS reach the engine's objects through the dev registry. It asks for one turn after
// another (a serializer client also for the paced name's, beside them) and prints the events
// the worker sends it as JSON lines (see checker.mjs) until SIGTERM.
// Its first line says it is ready, and names the process ids of its workerd (`{"kind":"ready",
// "pids":[…]}`: the harness pauses and kills them with this process); so does one after each restart.
//
// SIGUSR2 asks it to dispose of its isolate mid-hold: at the next acquisition it throws away
// its workerd while the turn holds the lease, and starts a new one.
//
//   node faults/workerd-client-process.mjs '<config JSON>'
import { Miniflare } from 'miniflare';

import { worker } from '../tests/runtimes/workerd.mjs';
import { childrenNamed } from './processes.mjs';

const config = JSON.parse(process.argv[2]);
const { id, names, registry, engine } = config;
const emit = (event) => process.stdout.write(`${JSON.stringify(event)}\n`);
const external = (className) => ({ className, scriptName: engine, useSQLite: true });
const options = {
  name: `keyturn-faults-${id}`.replace(/[^a-z0-9-]/gi, '-'),
  ...worker('faults/workerd/client-worker.mjs'),
  cf: false,
  bindings: { CONFIG: config },
  durableObjects: { LOCKS: external('LockDurableObject'), COUNTERS: external('FencedCounter') },
  unsafeDevRegistryPath: registry,
  outboundService: (request) => record(request),
};

/** The workerd processes this process started. */
const workerdPids = () => childrenNamed(process.pid, 'workerd');

process.on('unhandledRejection', (reason) => emit({ kind: 'crash', client: id, detail: `unhandled rejection: ${reason?.stack ?? reason}` }));

// The harness signals a client only once it said it is ready; these are set before that.
let stopping = false;
let disposeMidHold = false;
let disposing; // the isolate's replacement, while it is under way
process.on('SIGTERM', () => {
  stopping = true;
});
process.on('SIGUSR2', () => {
  disposeMidHold = true;
});

let mf = new Miniflare(options);
await mf.ready;
emit({ kind: 'ready', client: id, pids: workerdPids() });

/**
 * An event from the worker (its outbound fetch): written out before the worker goes on. After
 * an acquisition, when asked, the isolate is disposed a moment later, while it holds the lease
 * (and perhaps while its write is in flight).
 */
function record(request) {
  return request.text().then((line) => {
    if (line === '') return new Response(null, { status: 204 }); // cut short as its isolate was disposed
    process.stdout.write(`${line}\n`);
    if (disposeMidHold && JSON.parse(line).kind === 'acquired') {
      disposeMidHold = false;
      disposing = new Promise((resolve) => setTimeout(resolve, Math.random() * 4)).then(restart);
    }
    return new Response(null, { status: 204 });
  });
}

/** Throws away this client's workerd, with its isolate and whatever it held, and starts another. */
async function restart() {
  await mf.dispose();
  emit({ kind: 'disposed', client: id });
  mf = new Miniflare(options);
  await mf.ready;
  emit({ kind: 'ready', client: id, pids: workerdPids() });
}

/** Takes turns of `nameOf(n)`, one after another; `thinks`: a pause between them. */
async function caller(nameOf, thinks) {
  for (let ops = 0; !stopping; ops++) {
    const name = nameOf(ops);
    let failed = false;
    try {
      const response = await mf.dispatchFetch(`http://client/turn?name=${encodeURIComponent(name)}`, { method: 'POST' });
      if (response.status !== 204) throw new Error(`the worker answered ${response.status}: ${await response.text()}`);
    } catch (error) {
      // A turn cut short by its isolate's disposal is no failure of the lock.
      failed = disposing === undefined;
      if (failed) emit({ kind: 'failed', client: id, name, error: error?.name ?? String(error), message: String(error?.message) });
    }
    while (disposing !== undefined) {
      const replaced = disposing;
      await replaced;
      if (disposing === replaced) disposing = undefined;
    }
    // A client thinks between turns, as a service between requests (see redis-client-process.mjs);
    // its paced caller calls again at once (faults/turn.mjs, runCallers).
    if (thinks || failed) await new Promise((resolve) => setTimeout(resolve, 5 + Math.random() * 25));
  }
}
await Promise.all([caller((ops) => names[ops % names.length], true), ...(config.paced === undefined ? [] : [caller(() => config.paced.name, false)])]);
await mf.dispose().catch(() => {});
process.exit(0);
