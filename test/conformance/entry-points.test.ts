import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';

// The package's public entry points (package.json "exports"), as an app imports them from the
// built dist/ (npm test builds first; skipped when dist/ is missing).

const root = path.resolve(__dirname, '../..');
const built = fs.existsSync(path.join(root, 'dist/emulator/clients/cache.js'));

describe('entry points (package exports, built)', function () {
  before(function () {
    if (!built) this.skip();
  });

  it('quayside/cache, quayside/env, quayside/sync, quayside/sync/memory and quayside/emulator resolve with their typings', () => {
    const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));
    const want: Record<string, string[]> = {
      './cache': ['createCache'],
      './env': ['createEnv', 'runConsumer'],
      './sync': ['queue'],
      './sync/memory': ['queue', 'createMemoryQueues'],
      './emulator': ['startEmulator'],
    };
    for (const [sub, names] of Object.entries(want)) {
      const entry = pkg.exports[sub];
      assert.ok(fs.existsSync(path.join(root, entry.types)), `${sub} types`);
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      const mod = require(path.join(root, entry.default));
      for (const n of names) assert.equal(typeof mod[n], 'function', `${sub} exports ${n}`);
    }
  });

  it('quayside/sync/memory works from the build with no emulator', async () => {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const { createMemoryQueues } = require(path.join(root, 'dist/emulator/embedded/memory.js'));
    const mem = createMemoryQueues({ clock: 'virtual' });
    const q = mem.queue({ id: 'built' });
    await q.send({ data: { ok: true } });
    assert.deepEqual((await q.recv({ wait: false })).data, { ok: true });
    await mem.close();
  });
});
