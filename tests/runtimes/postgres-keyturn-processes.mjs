// The other side of tests/runtimes/postgres-keyturn-process.mjs: starts that process (a keyturn
// instance of its own over a postgresql server) and talks to it, one JSON line per command and
// per reply, in order.
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

const script = fileURLToPath(new URL('./postgres-keyturn-process.mjs', import.meta.url));

/**
 * A keyturn process over the server at `host`:`port`, its records in `table`, with `listen`
 * (wake-ups) when `listen`: `send(command)` answers its reply; `stop()` kills it.
 * @param {{ host: string, port: number, table: string, listen: boolean }} options
 */
export function postgresProcess(options) {
  const child = spawn(process.execPath, [script, JSON.stringify(options)], { stdio: ['pipe', 'pipe', 'inherit'] });
  const replies = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  /** @param {object} command */
  const send = async (command) => {
    child.stdin.write(`${JSON.stringify(command)}\n`);
    const { value, done } = await replies.next();
    if (done) throw new Error('the keyturn process ended');
    return JSON.parse(value);
  };
  const exited = new Promise((resolve) => child.once('exit', resolve));
  return {
    process: child,
    send,
    exited,
    stop() {
      child.stdin.end();
      child.kill('SIGKILL');
    },
  };
}
