// The other side of tests/runtimes/redis-keyturn-process.mjs: starts that process (a keyturn
// instance of its own over a redis-server) and talks to it, one JSON line per command and per
// reply, in order. Used by tests/js/cross-process.test.mjs and bench/cross-isolate.mjs.
import { fileURLToPath } from 'node:url';

import { lineProcess } from './line-process.mjs';

const script = fileURLToPath(new URL('./redis-keyturn-process.mjs', import.meta.url));

/**
 * A keyturn process over the redis-server on `port`, its records under `prefix`, with
 * `subscribe` (wake-ups) when `tells`: `send(command)` answers its reply; `holder` is its busy
 * key, as tests/js/busy-key.mjs takes a holder; `stop()` ends it.
 * @param {{ port: number, prefix: string, tells: boolean }} options
 */
export function keyturnProcess({ port, prefix, tells }) {
  const child = lineProcess(script, { port, prefix, subscribe: tells });
  const { send } = child;
  return {
    ...child,
    holder: {
      start: () => send({ op: 'start' }),
      calls: async () => (await send({ op: 'calls' })).calls,
      stop: async () => (await send({ op: 'stop' })).turns,
    },
  };
}
