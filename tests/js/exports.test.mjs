// Every binding the two wasm modules export is called by the package's JavaScript: a binding
// nobody calls is dead weight in every page and worker that loads its module. The bindings'
// names are read from the types wasm-bindgen writes (pkg/keyturn_*.d.ts); the callers are the
// package's static JS (keyturn-wasm/js/).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

const root = new URL('../..', import.meta.url).pathname;

/** Every `.js` and `.mjs` file under `dir`, as one text. */
function sources(dir) {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((entry) => entry.isFile() && /\.m?js$/.test(entry.name))
    .map((entry) => readFileSync(join(entry.parentPath ?? entry.path, entry.name), 'utf8'))
    .join('\n');
}

/** The methods of each class a module's types declare: `[class, method]`. */
function bindings(types) {
  const found = [];
  let current;
  for (const line of types.split('\n')) {
    const opened = line.match(/^export class (\w+)/);
    if (opened) current = opened[1];
    else if (line.startsWith('}')) current = undefined;
    const method = current && line.match(/^ {4}(?:static )?(\w+)\(/);
    if (method && !['free', 'constructor'].includes(method[1])) found.push([current, method[1]]);
  }
  return found;
}

const js = sources(join(root, 'keyturn-wasm/js'));

for (const module of ['keyturn_wasm', 'keyturn_lock']) {
  test(`every binding of ${module} is called by the package's JS`, () => {
    const found = bindings(readFileSync(join(root, 'pkg', `${module}.d.ts`), 'utf8'));
    assert.ok(found.length > 4, `the types of ${module} name its bindings`);
    const unused = found.filter(([, method]) => !js.includes(`.${method}(`)).map(([owner, method]) => `${owner}.${method}`);
    assert.deepEqual(unused, [], `bindings nobody calls: ${unused.join(', ')}`);
  });
}
