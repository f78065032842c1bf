// A slow upstream for the example worker's exports and searches (worker/src/exports.js,
// worker/src/searches.js), on a loopback port; each call takes 30–80 ms.
// - POST /exports/<tenant>: it keeps, per tenant (`tenants`), the calls in flight and the most at
//   once, and per slot the fences it saw — refusing (409) a fence not above the slot's last.
// - GET /searches/<tenant>?q=…: it keeps, per tenant (`searches`), the calls in flight, the most
//   at once, and when each arrived (performance.now()).
// Used by tests/js/dev-exports.test.mjs (through `make serve`) and tests/js/worker.test.mjs.
import { createServer } from 'node:http';

export function startUpstream() {
  const tenants = new Map(); // tenant → { inFlight, most, calls, refused, fences: Map(slot → last) }
  const searches = new Map(); // tenant → { inFlight, most, arrivals: [ms] }
  const later = (response, status, body, done) =>
    setTimeout(() => {
      done();
      response.writeHead(status, { 'content-type': 'application/json' });
      response.end(JSON.stringify(body));
    }, 30 + Math.random() * 50);
  const server = createServer((request, response) => {
    const url = new URL(request.url, 'http://upstream');
    const search = /^\/searches\/(.+)$/.exec(url.pathname);
    if (search) {
      const arrived = performance.now();
      const tenant = decodeURIComponent(search[1]);
      const seen = searches.get(tenant) ?? { inFlight: 0, most: 0, arrivals: [] };
      searches.set(tenant, seen);
      seen.arrivals.push(arrived);
      seen.most = Math.max(seen.most, ++seen.inFlight);
      later(response, 200, { tenant, q: url.searchParams.get('q') }, () => (seen.inFlight -= 1));
      return;
    }
    const tenant = decodeURIComponent(url.pathname.replace(/^\/exports\//, ''));
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
    later(response, fresh ? 200 : 409, { tenant, slot, fence }, () => (seen.inFlight -= 1));
  });
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => resolve({ port: server.address().port, tenants, searches, close: () => server.close() }));
  });
}
