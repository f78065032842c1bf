// Run by Deno (tests/js/deno.test.mjs): tracing on Deno. A subscriber of
// node:diagnostics_channel hears a turn's wait, start and end, and the package never reads the
// `process` global, whose first read loads Deno's whole Node process object — more than the rest
// of a cold start. Prints JSON.
const descriptor = Object.getOwnPropertyDescriptor(globalThis, 'process');
let processRead = false;
if (descriptor?.get !== undefined) {
  const get = descriptor.get;
  Object.defineProperty(globalThis, 'process', {
    ...descriptor,
    get() {
      processRead = true;
      return get.call(this);
    },
  });
}
const { createKeyedSerializer } = await import('../../pkg/deno.js');
const diagnostics = await import('node:diagnostics_channel');
const heard = [];
const subscriber = (message, name) => heard.push({ name, key: message.key, ok: message.ok });
const names = ['keyturn:turn:wait', 'keyturn:turn:start', 'keyturn:turn:end'];
for (const name of names) diagnostics.subscribe(name, subscriber);
const value = await createKeyedSerializer()('k', async () => 1);
for (const name of names) diagnostics.unsubscribe(name, subscriber);
console.log(JSON.stringify({ value, heard, trapped: descriptor?.get !== undefined, processRead }));
