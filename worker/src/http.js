// Small HTTP helpers: JSON replies, JSON bodies with a size limit, id checks.

export const MAX_BODY_BYTES = 4096;
const ID = /^[A-Za-z0-9_-]{1,64}$/;

export class HttpError extends Error {
  constructor(status, message, headers = {}) {
    super(message);
    this.status = status;
    this.headers = headers;
  }
}

export const json = (status, body, headers = {}) =>
  new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json', ...headers } });

export function checkId(value, what) {
  if (!ID.test(value)) throw new HttpError(400, `${what} must be 1 to 64 letters, digits, '-' or '_'`);
  return value;
}

/** The request's JSON body, refused when it is not JSON, not an object, or too large. */
export async function readJson(request) {
  const type = request.headers.get('content-type') ?? '';
  if (!type.startsWith('application/json')) throw new HttpError(415, 'the body must be application/json');
  const declared = Number(request.headers.get('content-length') ?? 0);
  if (declared > MAX_BODY_BYTES) throw new HttpError(413, `the body must be at most ${MAX_BODY_BYTES} bytes`);
  const bytes = new Uint8Array(await request.arrayBuffer());
  if (bytes.length > MAX_BODY_BYTES) throw new HttpError(413, `the body must be at most ${MAX_BODY_BYTES} bytes`);
  let body;
  try {
    body = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes));
  } catch {
    throw new HttpError(400, 'the body is not valid JSON');
  }
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw new HttpError(400, 'the body must be a JSON object');
  return body;
}
