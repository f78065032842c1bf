// One Bun worker of tests/bun/serve.test.mjs: its own instance of the package, a SqliteStore on
// its own bun:sqlite handle of the shared file, `each` increments of the counter under withLock.
import { Database } from 'bun:sqlite';

import { SqliteStore, withLock } from 'keyturn';

self.onmessage = async ({ data: { file, each } }) => {
  try {
    const db = new Database(file);
    // Writers on other handles make SQLite answer SQLITE_BUSY; wait for them instead.
    db.run('PRAGMA busy_timeout = 10000');
    const store = new SqliteStore((sql, params) => db.query(sql).all(...params));
    await store.setup();
    const wrote = [];
    for (let i = 0; i < each; i++) {
      wrote.push(await withLock(store, 'counter', async () => {
        const { n } = db.query('SELECT n FROM counter WHERE id = 1').get();
        await Bun.sleep(1); // the other worker runs meanwhile: only the lock keeps it out
        db.query('UPDATE counter SET n = ? WHERE id = 1').run(n + 1);
        return n + 1;
      }, { waitMs: 30_000 }));
    }
    db.close();
    postMessage({ wrote });
  } catch (error) {
    postMessage({ error: String(error?.stack ?? error) });
  }
};
