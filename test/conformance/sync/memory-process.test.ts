import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import path from 'node:path';

// quayside/sync/memory in a script of its own: nothing else keeps Node running, so a recv that is
// still waiting must hold the process open (as a socket does for the emulator's clients), and an
// idle handle must not.

const MEMORY = path.resolve(__dirname, '../../../emulator/embedded/memory');

function runScript(body: string): Promise<{ code: number | null; out: string }> {
  const code = `const { queue } = require(${JSON.stringify(MEMORY)});\n(async () => {\n${body}\n})();`;
  return new Promise((resolve) => {
    execFile(process.execPath, ['-r', 'tsx/cjs', '-e', code], { timeout: 15_000 }, (err, stdout) => {
      resolve({ code: err ? ((err as { code?: number }).code ?? null) : 0, out: stdout });
    });
  });
}

describe('quayside/sync/memory in a script of its own', function () {
  this.timeout(30_000);

  it('a waiting recv keeps the process alive until it is answered (a delayed send, a nack delay)', async () => {
    const r = await runScript(`
      const q = queue({ id: 'jobs' });
      await q.send({ data: 'later', delayMs: 150 });
      const m = await q.recv({ timeoutMs: 5000 });
      console.log('got', m && m.data);
      await m.nack({ delayMs: 100 });
      const again = await q.recv({ timeoutMs: 5000 });
      console.log('again', again && again.data, again && again.attempt);
      await again.ack();
    `);
    assert.deepEqual(r.out.trim().split('\n'), ['got later', 'again later 2']);
    assert.equal(r.code, 0);
  });

  it('a recv that times out answers null, and an idle handle then lets the process end', async () => {
    const r = await runScript(`
      const q = queue({ id: 'empty' });
      console.log('got', await q.recv({ timeoutMs: 100 }));
    `);
    assert.equal(r.out.trim(), 'got null');
    assert.equal(r.code, 0);
  });
});
