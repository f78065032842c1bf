// What the package's JavaScript uses of its hosts that TypeScript's libs do not declare: only
// the type check reads this (tsconfig.json), nothing ships it.

declare module 'cloudflare:workers' {
  /** workerd's base class of Durable Objects. */
  export class DurableObject<Env = unknown> {
    constructor(ctx: DurableObjectState, env: Env);
    protected ctx: DurableObjectState;
    protected env: Env;
  }

  /** What a Durable Object's constructor is given: its storage, SQL among it. */
  export interface DurableObjectState {
    storage: { sql: { exec(query: string, ...bindings: unknown[]): { toArray(): Record<string, unknown>[] } } };
  }
}

/** Deno's global, in the Deno entry (`deno.js`): the one call it makes. */
declare const Deno: { readFileSync(path: URL): Uint8Array };

/** Vercel's bundlers, in the edge-light entry (`edge-light.js`): a `.wasm?module` import is the compiled module. */
declare module '*.wasm?module' {
  const module: WebAssembly.Module;
  export default module;
}
