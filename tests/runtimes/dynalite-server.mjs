// A dynalite server of one's own (DynamoDB's API over LevelDB, in memory), for the tests and the
// benchmark: its own process (dynalite-main.cjs) on a free loopback port, ready once it says it
// listens, stopped by its PID (never another's). `dynamoClient` is the SDK's aggregated client pointed at it, with
// dummy credentials and a region: nothing leaves the machine.
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

import { freePort } from './ports.mjs';

const require = createRequire(import.meta.url);

/** Whether dynalite is installed (a devDependency: `npm ci` installs it). */
export function haveDynalite() {
  try {
    require.resolve('dynalite');
    return true;
  } catch {
    return false;
  }
}

/**
 * Starts dynalite on a free loopback port: `{ port, endpoint, process, stop(signal), exited }`.
 * Tables stay CREATING for `createTableMs` (dynalite's default, 500 ms, as DynamoDB's own wait).
 * @param {{ createTableMs?: number }} [options]
 */
export async function startDynalite({ createTableMs = 500 } = {}) {
  const port = await freePort();
  const child = spawn(process.execPath, [fileURLToPath(new URL('./dynalite-main.cjs', import.meta.url)), String(port), String(createTableMs)], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  const listening = new Promise((resolve, reject) => {
    const lines = createInterface({ input: child.stdout });
    lines.on('line', (line) => {
      if (line.startsWith('Dynalite listening')) resolve(undefined);
    });
    child.once('exit', (code) => reject(new Error(`dynalite exited (${code}) before it listened`)));
  });
  await listening;
  return { port, endpoint: `http://127.0.0.1:${port}`, process: child, exited, stop: (signal = 'SIGTERM') => child.kill(signal) };
}

/**
 * The aggregated DynamoDB client of @aws-sdk/client-dynamodb, pointed at `endpoint`.
 * @param {string} endpoint
 */
export async function dynamoClient(endpoint) {
  const { DynamoDB } = await import('@aws-sdk/client-dynamodb');
  return new DynamoDB({
    endpoint,
    region: 'us-east-1',
    credentials: { accessKeyId: 'keyturn-test', secretAccessKey: 'keyturn-test' },
  });
}

/**
 * Creates `table` (string partition key `pk`, on demand) directly through `client` and waits
 * until it is ACTIVE: for tests that must not depend on the store's `setup()`.
 * @param {import('@aws-sdk/client-dynamodb').DynamoDB} client
 * @param {string} table
 */
export async function createTable(client, table, keyAttribute = 'pk') {
  await client.createTable({
    TableName: table,
    AttributeDefinitions: [{ AttributeName: keyAttribute, AttributeType: 'S' }],
    KeySchema: [{ AttributeName: keyAttribute, KeyType: 'HASH' }],
    BillingMode: 'PAY_PER_REQUEST',
  });
  while ((await client.describeTable({ TableName: table })).Table.TableStatus !== 'ACTIVE') await new Promise((resolve) => setTimeout(resolve, 20));
}
