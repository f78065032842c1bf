// Preloaded (`--require`) into `next build` and `next start` by tests/js/nextjs.test.mjs. Vercel's
// Edge runtime refuses to compile wasm from bytes, and Next's local sandbox for edge routes
// (edge-runtime's VM) does not: this makes every Edge Runtime context refuse it too, and says on
// stderr, once per context, what compiling a module from bytes did there, so the test knows the
// refusal held where the edge route ran.
const vm = require('node:vm');

const createContext = vm.createContext;
vm.createContext = function refusingWasmCodegen(context, options) {
  if (options?.name !== 'Edge Runtime') return createContext.call(this, context, options);
  const made = createContext.call(this, context, { ...options, codeGeneration: { strings: false, ...options.codeGeneration, wasm: false } });
  const probe = vm.runInContext(
    `(() => { try { new WebAssembly.Module(new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0])); return 'compiled'; } catch (error) { return String(error); } })()`,
    made,
  );
  process.stderr.write(`edge context: wasm from bytes: ${probe}\n`);
  return made;
};
