// Type-checked (tsc --noEmit) against pkg/index.d.ts by `make test`: every export has types,
// and misuse is a type error.
import { createKeyedSerializer, DEFAULT_TIMEOUT_MS, SerializedWorkTimeout, type Serialize } from 'keyturn';

const serialize: Serialize = createKeyedSerializer({ timeoutMs: DEFAULT_TIMEOUT_MS });
const n: Promise<number> = serialize('key', async (signal: AbortSignal) => (signal.aborted ? 0 : 1));
const s: Promise<string> = serialize('key', () => 'sync', { onLateSettle: (value: unknown) => void value });
const pending: number = serialize.pending();

async function handle(): Promise<void> {
  try {
    await n;
    await s;
  } catch (error) {
    if (error instanceof SerializedWorkTimeout) {
      const key: string = error.key;
      const ms: number = error.timeoutMs;
      const name: 'SerializedWorkTimeout' = error.name;
      void [key, ms, name];
    }
  }
}
void [handle, pending];

// @ts-expect-error the key is a string
serialize(5, () => 1);
// @ts-expect-error work is a function
serialize('key', 5);
// @ts-expect-error timeoutMs is a number
createKeyedSerializer({ timeoutMs: '5' });
// @ts-expect-error onLateSettle is a function
serialize('key', () => 1, { onLateSettle: true });
