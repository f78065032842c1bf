// A counter per id on AWS Lambda behind an HTTP API (API Gateway, payload 2.0): POST /<id> adds
// one, one turn at a time per id across every concurrent instance of the function; GET /<id>
// reads it. The lease is an item of keyturn's table (DynamoDbStore); the count an item of
// COUNTERS_TABLE, written only with a fence above the last.
import { DynamoDB } from '@aws-sdk/client-dynamodb';
import { createKeyedSerializer, DynamoDbStore } from 'keyturn';

// Module scope runs once per instance, at its cold start; warm invocations reuse all of it.
const client = new DynamoDB(); // region, credentials (and any endpoint) from the environment
const counters = process.env.COUNTERS_TABLE ?? 'counters';
const store = new DynamoDbStore(client, { table: process.env.LOCKS_TABLE ?? 'keyturn-locks' });
await store.setup(); // creates the table if it is missing; one describeTable when it exists
const serialize = createKeyedSerializer({ store, timeoutMs: 10_000 });

const json = (statusCode, body) => ({ statusCode, headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

async function read(id) {
  const { Item } = await client.getItem({ TableName: counters, Key: { id: { S: id } }, ConsistentRead: true });
  return Number(Item?.count?.N ?? 0);
}

export const handler = async (event, context) => {
  const id = decodeURIComponent(event.rawPath.slice(1)) || 'default';
  const method = event.requestContext.http.method;
  if (method === 'GET') return json(200, { count: await read(id) });
  if (method !== 'POST') return json(405, { error: 'GET or POST' });
  // A turn may take what is left of the invocation, less a margin to answer.
  const timeoutMs = Math.max(1, Math.min(10_000, context.getRemainingTimeInMillis() - 500));
  try {
    const count = await serialize(id, async (signal, turn) => {
      const next = (await read(id)) + 1;
      if (signal.aborted) throw new Error('too late: the next turn re-decides');
      // The fence keeps a turn that outlived its lease from writing over a later one.
      await client.putItem({
        TableName: counters,
        Item: { id: { S: id }, count: { N: String(next) }, fence: { N: String(turn.fence) } },
        ConditionExpression: 'attribute_not_exists(fence) OR fence < :fence',
        ExpressionAttributeValues: { ':fence': { N: String(turn.fence) } },
      });
      return next;
    }, { timeoutMs });
    return json(200, { id, count });
  } catch (error) {
    return json(503, { error: String(error) });
  }
};
