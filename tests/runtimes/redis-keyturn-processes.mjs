// The other side of tests/runtimes/redis-keyturn-process.mjs: starts that process (a keyturn
// instance of its own over a redis-server) and talks to it, one JSON line per command and per
// reply, in order. Used by tests/js/cross-process.test.mjs and bench/cross-isolate.mjs.
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

const script = fileURLToPath(new URL('./redis-keyturn-process.mjs', import.meta.url));

/**
 * A keyturn process over the redis-server on `port`, its records under `prefix`, with
 * `subscribe` (wake-ups) when `tells`: `send(command)` answers its reply; `holder` is its busy
 * key, as tests/js/busy-key.mjs takes a holder; `stop()` ends it.
 * @param {{ port: number, prefix: string, tells: boolean }} options
 */
export function keyturnProcess({ port, prefix, tells }) {
  const child = spawn(process.execPath, [script, JSON.stringify({ port, prefix, subscribe: tells })], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const replies = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  /** @param {object} command */
  const send = async (command) => {
    child.stdin.write(`${JSON.stringify(command)}\n`);
    const { value, done } = await replies.next();
    if (done) throw new Error('the keyturn process ended');
    return JSON.parse(value);
  };
  return {
    process: child,
    send,
    holder: {
      start: () => send({ op: 'start' }),
      calls: async () => (await send({ op: 'calls' })).calls,
      stop: async () => (await send({ op: 'stop' })).turns,
    },
    stop() {
      child.stdin.end();
      child.kill('SIGKILL');
    },
  };
}
