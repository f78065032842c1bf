// A child process spoken to one JSON line per command and per reply, in order: the other side
// of the cross-process tests (a keyturn instance of its own over a store, in a process of its
// own; tests/runtimes/*-keyturn-process.mjs).
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';

/**
 * Starts `script` with `config` (its one argument, as JSON): `send(command)` answers its reply;
 * `exited` settles when it ends; `stop()` kills it.
 * @param {string} script
 * @param {object} config
 */
export function lineProcess(script, config) {
  const child = spawn(process.execPath, [script, JSON.stringify(config)], { stdio: ['pipe', 'pipe', 'inherit'] });
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
    exited: new Promise((resolve) => child.once('exit', resolve)),
    stop() {
      child.stdin.end();
      child.kill('SIGKILL');
    },
  };
}
