// A loopback port for a server the tests, benchmarks or the fault harness start.
import { createServer } from 'node:net';

/** A loopback port that was free a moment ago. */
export function freePort() {
  return new Promise((resolve) => {
    const probe = createServer().listen(0, '127.0.0.1', () => {
      const { port } = probe.address();
      probe.close(() => resolve(port));
    });
  });
}
