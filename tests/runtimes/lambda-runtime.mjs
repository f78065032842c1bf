// One AWS Lambda execution environment of the Node.js runtime, emulated in a process of its own
// (no real Lambda here): the function's environment set before anything loads, the working
// directory the task root, the handler resolved from `_HANDLER` ("index.handler") as the
// runtime's loader does (`index.js` as ESM or CommonJS by the nearest package.json's type, then
// `index.mjs`, then `index.cjs`), loaded once at init; then invocations one at a time — an
// instance never runs two at once — each with a context whose `getRemainingTimeInMillis` counts
// down to the invocation's deadline, and its result sent on as JSON, as the runtime serializes
// it. Driven by tests/runtimes/line-process.mjs's JSON lines:
//   {"op":"init"}                        loads the handler: { initMs, handlerType }
//   {"op":"invoke","event","timeoutMs"}  one invocation: { result } or { error: { errorType, errorMessage } }
//   {"op":"loads"}                       how often the handler module was evaluated: { loads }
//   node tests/runtimes/lambda-runtime.mjs '{"taskRoot":"/path","handler":"index.handler","env":{…}}'
import { createInterface } from 'node:readline';
import { randomUUID } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';

const { taskRoot, handler: handlerName, env = {} } = JSON.parse(process.argv[2]);
const functionName = env.AWS_LAMBDA_FUNCTION_NAME ?? 'keyturn-example';
Object.assign(process.env, {
  AWS_LAMBDA_FUNCTION_NAME: functionName,
  AWS_LAMBDA_FUNCTION_VERSION: '$LATEST',
  AWS_LAMBDA_FUNCTION_MEMORY_SIZE: '128',
  AWS_EXECUTION_ENV: `AWS_Lambda_nodejs${process.versions.node.split('.')[0]}.x`,
  LAMBDA_TASK_ROOT: taskRoot,
  _HANDLER: handlerName,
  ...env,
});
process.chdir(taskRoot);

/** The type of the package.json nearest to `file`, as Node decides how to load a `.js`. */
function packageType(file) {
  for (let dir = dirname(file); ; dir = dirname(dir)) {
    const manifest = join(dir, 'package.json');
    if (existsSync(manifest)) return JSON.parse(readFileSync(manifest, 'utf8')).type ?? 'commonjs';
    if (dirname(dir) === dir) return 'commonjs';
  }
}

/** The handler `module.function` under the task root, loaded as the runtime loads it. */
async function loadHandler(spec) {
  const dot = spec.lastIndexOf('.');
  const [modulePath, name] = [spec.slice(0, dot), spec.slice(dot + 1)];
  const base = join(taskRoot, modulePath);
  let loaded;
  if (existsSync(`${base}.js`)) loaded = packageType(`${base}.js`) === 'module' ? await import(pathToFileURL(`${base}.js`).href) : createRequire(`${base}.js`)(`${base}.js`);
  else if (existsSync(`${base}.mjs`)) loaded = await import(pathToFileURL(`${base}.mjs`).href);
  else if (existsSync(`${base}.cjs`)) loaded = createRequire(`${base}.cjs`)(`${base}.cjs`);
  else throw Object.assign(new Error(`Cannot find module '${modulePath}'`), { name: 'Runtime.ImportModuleError' });
  loads += 1;
  const fn = loaded[name];
  if (typeof fn !== 'function') throw Object.assign(new Error(`${spec} is undefined or not exported`), { name: 'Runtime.HandlerNotFound' });
  return fn;
}

let loads = 0;
let handler;

/** One invocation: the handler's promise (async handlers: the runtime's only kind since Node 24). */
async function invoke(event, timeoutMs = 30000) {
  const deadline = Date.now() + timeoutMs;
  const awsRequestId = randomUUID();
  const context = {
    callbackWaitsForEmptyEventLoop: true,
    functionName,
    functionVersion: '$LATEST',
    invokedFunctionArn: `arn:aws:lambda:${process.env.AWS_REGION ?? 'us-east-1'}:123456789012:function:${functionName}`,
    memoryLimitInMB: '128',
    awsRequestId,
    logGroupName: `/aws/lambda/${functionName}`,
    logStreamName: `local/[$LATEST]${process.pid}`,
    getRemainingTimeInMillis: () => Math.max(0, deadline - Date.now()),
  };
  let timer;
  const timedOut = new Promise((_, reject) => {
    timer = setTimeout(() => reject(Object.assign(new Error(`Task timed out after ${timeoutMs / 1000} seconds`), { name: 'Sandbox.Timedout' })), timeoutMs);
  });
  try {
    const result = await Promise.race([handler(event, context), timedOut]);
    return { result: result === undefined ? null : JSON.parse(JSON.stringify(result)) };
  } catch (error) {
    return { error: { errorType: error?.name ?? 'Error', errorMessage: error?.message ?? String(error) } };
  } finally {
    clearTimeout(timer);
  }
}

const say = (answer) => process.stdout.write(`${JSON.stringify(answer)}\n`);
// One command at a time, as the runtime's loop takes one invocation at a time.
for await (const line of createInterface({ input: process.stdin })) {
  const command = JSON.parse(line);
  if (command.op === 'init') {
    const started = performance.now();
    try {
      handler = await loadHandler(handlerName);
      say({ initMs: performance.now() - started, handlerType: typeof handler });
    } catch (error) {
      say({ error: { errorType: error.name, errorMessage: error.message } });
    }
  } else if (command.op === 'invoke') say(await invoke(command.event, command.timeoutMs));
  else if (command.op === 'loads') say({ loads });
  else say({ error: { errorType: 'Unknown', errorMessage: `no op ${command.op}` } });
}
