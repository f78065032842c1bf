import { increment } from '../../../../lib/counter.js';

// Bundled with the package's `edge-light` entry: its wasm arrives compiled, never fetched.
export const runtime = 'edge';

export async function POST(request, { params }) {
  const { key } = await params;
  const count = await increment(key);
  return Response.json({ key, count, runtime: typeof EdgeRuntime === 'string' ? 'edge' : 'nodejs' });
}
