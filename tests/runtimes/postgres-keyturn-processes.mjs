// The other side of tests/runtimes/postgres-keyturn-process.mjs: starts that process (a keyturn
// instance of its own over a postgresql server) and talks to it, one JSON line per command and
// per reply, in order.
import { fileURLToPath } from 'node:url';

import { lineProcess } from './line-process.mjs';

const script = fileURLToPath(new URL('./postgres-keyturn-process.mjs', import.meta.url));

/**
 * A keyturn process over the server at `host`:`port`, its records in `table`, with `listen`
 * (wake-ups) when `listen`: `send(command)` answers its reply; `stop()` kills it.
 * @param {{ host: string, port: number, table: string, listen: boolean }} options
 */
export function postgresProcess(options) {
  return lineProcess(script, options);
}
