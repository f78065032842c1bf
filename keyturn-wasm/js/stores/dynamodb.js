// DynamoDB as a LockStore, over the aggregated `DynamoDB` client of @aws-sdk/client-dynamodb v3
// (`new DynamoDB(config)`, whose methods are `putItem`, `getItem`, …): the package imports
// nothing from the SDK. A record is one item, `{ [keyAttribute]: key, value, version }`, all
// strings. A create is a PutItem conditioned on `attribute_not_exists` of the key, a replace a
// PutItem conditioned on the version; a failed condition (ConditionalCheckFailedException) is
// the null answer, so either is one request. Reads are strongly consistent: an eventually
// consistent read could show a holder a record older than its own last write.
//
// The version is chosen by the writer (as RedisStore's: a random id and a count), so a write
// knows it without asking DynamoDB to return the item.
// An item at a key without the two string attributes is not ours: reading it is an error,
// never a record a lock could take over, and no condition of ours matches it, so it is never
// overwritten or released.
import { LockStoreError } from '../errors.js';
import { OptionNames, wrongType } from '../arguments.js';
import { Versions } from './versions.js';

const OPTIONS = new OptionNames(['table', 'keyAttribute']);

// DynamoDB's own rule for a table's name.
const TABLE_NAME = /^[A-Za-z0-9_.-]{3,255}$/;
// Stricter than DynamoDB's (any 1 to 255 bytes): an identifier. Names go as
// ExpressionAttributeNames, never into an expression's text, but a strict rule keeps a typo or an
// unchecked input from becoming an attribute silently.
const ATTRIBUTE_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,254}$/;
// The record's own attributes; the key may be named anything else.
const VALUE = 'value';
const VERSION = 'version';

// How long `setup()` waits for a table to become ACTIVE (DynamoDB takes seconds, at most a few
// minutes), and its pauses between looks at the table.
const SETUP_MS = 5 * 60_000;
const SETUP_PAUSE_MS = [50, 1000];

/**
 * What the store uses of the aggregated `DynamoDB` client (`setup()` also uses `describeTable`
 * and `createTable`).
 * @typedef {object} DynamoDbClient
 * @property {(input: object) => Promise<unknown>} putItem
 * @property {(input: object) => Promise<unknown>} getItem
 * @property {((input: object) => Promise<unknown>) | undefined} [describeTable]
 * @property {((input: object) => Promise<unknown>) | undefined} [createTable]
 */

/**
 * Whether `error` is DynamoDB's answer named `name` (the SDK's error class sets `name`).
 * @param {unknown} error
 * @param {string} name
 */
const named = (error, name) => /** @type {{ name?: unknown } | null | undefined} */ (error)?.name === name;

/**
 * How many times the SDK sent the request that failed with `error` (its `$metadata`).
 * @param {unknown} error
 */
const attempts = (error) => {
  const sent = /** @type {{ $metadata?: { attempts?: unknown } } | null | undefined} */ (error)?.$metadata?.attempts;
  return typeof sent === 'number' ? sent : 1;
};

/** @param {number} ms */
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * A string attribute of `item`, or undefined.
 * @param {Record<string, unknown>} item
 * @param {string} name
 */
function stringAttribute(item, name) {
  const attribute = /** @type {{ S?: unknown } | null | undefined} */ (item[name]);
  return typeof attribute === 'object' && attribute !== null && typeof attribute.S === 'string' ? attribute.S : undefined;
}

/**
 * The option `what`: a string matching `pattern`.
 * @param {unknown} name
 * @param {string} what
 * @param {RegExp} pattern
 * @param {string} rule
 * @returns {string}
 */
function checkName(name, what, pattern, rule) {
  if (typeof name !== 'string') throw wrongType(what, 'a string', name);
  if (!pattern.test(name)) throw new RangeError(`keyturn: ${what} must be ${rule}, not ${JSON.stringify(name)}`);
  return name;
}

/**
 * A lock store over one DynamoDB table whose partition key is the string attribute
 * `keyAttribute` (default `pk`). `await store.setup()` creates the table if it is missing.
 */
export class DynamoDbStore {
  /** @type {DynamoDbClient} */
  #client;
  /** @type {string} */
  #table;
  /** @type {string} */
  #key;
  #versions = new Versions();
  /**
   * @param {DynamoDbClient} client
   * @param {{ table: string, keyAttribute?: string }} options
   */
  constructor(client, options) {
    if (client === null || typeof client !== 'object') throw wrongType('client', 'the DynamoDB client of @aws-sdk/client-dynamodb', client);
    if (typeof client.putItem !== 'function' || typeof client.getItem !== 'function') {
      // DynamoDBClient (`send` only) and DynamoDBDocument (`put`, `get`) are the likely mix-ups.
      throw new TypeError('keyturn: client must be the aggregated DynamoDB client (`new DynamoDB(config)` of @aws-sdk/client-dynamodb, with putItem and getItem), not DynamoDBClient or a document client');
    }
    if (options === undefined) throw wrongType('options', 'an object with table', options);
    OPTIONS.check(options, 'options');
    this.#table = checkName(options.table, 'options.table', TABLE_NAME, '3 to 255 letters, digits, _, - or .');
    this.#key = checkName(options.keyAttribute ?? 'pk', 'options.keyAttribute', ATTRIBUTE_NAME, 'an identifier (a letter or _, then letters, digits or _; at most 255)');
    if (this.#key === VALUE || this.#key === VERSION) {
      throw new RangeError(`keyturn: options.keyAttribute must not be ${JSON.stringify(this.#key)}, an attribute of the store's records`);
    }
    this.#client = client;
  }

  /**
   * Creates the table if it is missing — a string partition key named `keyAttribute`, on-demand
   * capacity — and resolves once it is ACTIVE. Idempotent: an existing table is only checked.
   * Rejects with `LockStoreError` when the client fails, when the table's key is another, or
   * when it is not ACTIVE within 5 minutes.
   * @returns {Promise<void>}
   */
  async setup() {
    const client = this.#client;
    if (typeof client.describeTable !== 'function' || typeof client.createTable !== 'function') {
      throw new TypeError('keyturn: setup() needs the client\'s describeTable and createTable (the aggregated DynamoDB client has them)');
    }
    const TableName = this.#table;
    const until = Date.now() + SETUP_MS;
    let pause = SETUP_PAUSE_MS[0];
    try {
      for (;;) {
        const table = await this.#describe(client);
        if (table === null) {
          await client
            .createTable({
              TableName,
              AttributeDefinitions: [{ AttributeName: this.#key, AttributeType: 'S' }],
              KeySchema: [{ AttributeName: this.#key, KeyType: 'HASH' }],
              BillingMode: 'PAY_PER_REQUEST',
            })
            // Created meanwhile by another caller of setup(): wait for it as for ours.
            .catch((/** @type {unknown} */ error) => {
              if (!named(error, 'ResourceInUseException')) throw error;
            });
        } else {
          this.#checkKey(table);
          if (table.TableStatus === 'ACTIVE') return;
        }
        if (Date.now() + pause > until) throw new Error(`the table ${TableName} is not ACTIVE after ${SETUP_MS / 1000} s`);
        await sleep(pause);
        pause = Math.min(pause * 2, SETUP_PAUSE_MS[1]);
      }
    } catch (error) {
      if (error instanceof LockStoreError) throw error;
      throw new LockStoreError(`keyturn: DynamoDbStore setup() of ${TableName} failed: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
    }
  }

  /**
   * The table's description, or null when it does not exist.
   * @param {DynamoDbClient} client
   * @returns {Promise<{ TableStatus?: unknown, KeySchema?: unknown, AttributeDefinitions?: unknown } | null>}
   */
  async #describe(client) {
    try {
      const answer = /** @type {{ Table?: unknown } | null | undefined} */ (await /** @type {NonNullable<DynamoDbClient['describeTable']>} */ (client.describeTable)({ TableName: this.#table }));
      const table = answer?.Table;
      if (typeof table !== 'object' || table === null) throw new TypeError('keyturn: DynamoDB answered describeTable without a Table');
      return table;
    } catch (error) {
      if (named(error, 'ResourceNotFoundException')) return null;
      throw error;
    }
  }

  /**
   * An existing table must have one key, the string partition key `keyAttribute`: the store's
   * requests name only it.
   * @param {{ KeySchema?: unknown, AttributeDefinitions?: unknown }} table
   */
  #checkKey(table) {
    const keys = Array.isArray(table.KeySchema) ? table.KeySchema : [];
    const types = Array.isArray(table.AttributeDefinitions) ? table.AttributeDefinitions : [];
    const type = types.find((definition) => definition?.AttributeName === this.#key)?.AttributeType;
    if (keys.length !== 1 || keys[0]?.AttributeName !== this.#key || keys[0]?.KeyType !== 'HASH' || type !== 'S') {
      const found = keys.map((key) => `${key?.AttributeName} (${key?.KeyType})`).join(', ');
      throw new LockStoreError(`keyturn: the table ${this.#table} exists with the key ${found || 'unknown'}; DynamoDbStore needs a string partition key ${this.#key} and no sort key (options.keyAttribute names it)`);
    }
  }

  // Each method answers a promise, never a throw: a client that throws is a rejection.

  /**
   * @param {string} key
   * @param {string} value
   */
  create(key, value) {
    return this.#put(key, value, 'attribute_not_exists(#k)', { '#k': this.#key }, undefined);
  }

  /** @param {string} key */
  read(key) {
    try {
      // Promise.resolve: a client that answers a plain value is heard as one (and checked).
      return Promise.resolve(this.#client.getItem({ TableName: this.#table, Key: { [this.#key]: { S: key } }, ConsistentRead: true })).then((answer) => {
        if (typeof answer !== 'object' || answer === null) throw new TypeError(`keyturn: DynamoDB answered getItem with ${answer === null ? 'null' : typeof answer}, not an object`);
        const item = /** @type {{ Item?: unknown }} */ (answer).Item;
        if (item === undefined || item === null) return null;
        if (typeof item !== 'object') throw new TypeError(`keyturn: DynamoDB answered getItem with an Item that is ${typeof item}`);
        const record = /** @type {Record<string, unknown>} */ (item);
        const value = stringAttribute(record, VALUE);
        const version = stringAttribute(record, VERSION);
        if (value === undefined || version === undefined) {
          throw new TypeError(`keyturn: the item ${JSON.stringify(key)} in ${this.#table} is not a DynamoDbStore record (no string attributes ${VALUE} and ${VERSION}); it is left as it is`);
        }
        return { value, version };
      });
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /**
   * @param {string} key
   * @param {string} version
   * @param {string} value
   */
  replace(key, version, value) {
    return this.#put(key, value, '#ver = :ver', { '#ver': VERSION }, { ':ver': { S: version } });
  }

  /**
   * A PutItem of the record under `condition`: the new version, or null when the condition failed.
   * @param {string} key
   * @param {string} value
   * @param {string} condition
   * @param {Record<string, string>} names
   * @param {Record<string, { S: string }> | undefined} values
   * @returns {Promise<string | null>}
   */
  #put(key, value, condition, names, values) {
    try {
      const version = this.#versions.next();
      const answer = this.#client.putItem({
        TableName: this.#table,
        Item: { [this.#key]: { S: key }, [VALUE]: { S: value }, [VERSION]: { S: version } },
        ConditionExpression: condition,
        ExpressionAttributeNames: names,
        ExpressionAttributeValues: values,
      });
      return Promise.resolve(answer).then(
        (reply) => {
          if (typeof reply !== 'object' || reply === null) throw new TypeError(`keyturn: DynamoDB answered putItem with ${reply === null ? 'null' : typeof reply}, not an object`);
          return version;
        },
        (error) => {
          if (!named(error, 'ConditionalCheckFailedException')) throw error;
          // A failed condition is the null answer. But a request the SDK sent more than once (it
          // retries after a dropped connection or a lost answer) may have failed its condition
          // on this very write, applied by an earlier attempt: the item tells, as no other
          // write carries this version. Another write standing there is null, whether or not
          // this one applied first — a record overwritten since is no longer this writer's.
          if (attempts(error) <= 1) return null;
          return this.read(key).then((record) => (record !== null && record.version === version ? version : null));
        },
      );
    } catch (error) {
      return Promise.reject(error);
    }
  }
}
