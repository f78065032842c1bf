import { fileURLToPath } from 'node:url';

// This example sits inside the keyturn repository, whose lockfile would make Next take the
// repository for the app's root. In an app of your own, leave both out: keyturn needs no config.
const root = fileURLToPath(new URL('.', import.meta.url));

export default { turbopack: { root }, outputFileTracingRoot: root };
