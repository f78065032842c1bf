// A slow upstream for the example worker's exports (worker/src/exports.js), on a loopback port:
// each POST /exports/<tenant> takes 30–80 ms, and it keeps, per tenant, the calls in flight and
// the most at once, and per slot the fences it saw — refusing (409) a fence not above the
// slot's last. Used by tests/js/dev-exports.test.mjs (through `make serve`).
import { createServer } from 'node:http';

export function startUpstream() {
  const tenants = new Map(); // tenant → { inFlight, most, calls, refused, fences: Map(slot → last) }
  const server = createServer((request, response) => {
    const tenant = decodeURIComponent(request.url.replace(/^\/exports\//, ''));
    const seen = tenants.get(tenant) ?? { inFlight: 0, most: 0, calls: 0, refused: 0, fences: new Map() };
    tenants.set(tenant, seen);
    const slot = Number(request.headers['x-slot']);
    const fence = Number(request.headers['x-fence']);
    seen.inFlight += 1;
    seen.calls += 1;
    seen.most = Math.max(seen.most, seen.inFlight);
    const fresh = fence > (seen.fences.get(slot) ?? 0);
    if (fresh) seen.fences.set(slot, fence);
    else seen.refused += 1;
    setTimeout(() => {
      seen.inFlight -= 1;
      response.writeHead(fresh ? 200 : 409, { 'content-type': 'application/json' });
      response.end(JSON.stringify({ tenant, slot, fence }));
    }, 30 + Math.random() * 50);
  });
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => resolve({ port: server.address().port, tenants, close: () => server.close() }));
  });
}
