import { increment } from '../../../../lib/counter.js';

// Bundled with the package's Node entry, with no `serverExternalPackages` needed.
export const runtime = 'nodejs';

export async function POST(request, { params }) {
  const { key } = await params;
  const count = await increment(key);
  return Response.json({ key, count, runtime: typeof EdgeRuntime === 'string' ? 'edge' : 'nodejs' });
}
