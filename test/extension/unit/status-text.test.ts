import { strict as assert } from 'assert';
import { statusText } from '../../../src/core/statusText';
import type { Snapshot } from '../../../src/core/lifecycle';

describe('extension: status bar text', () => {
  const ep = { url: 'ws://127.0.0.1:7433', http: 'http://127.0.0.1:7433', token: 't', host: '127.0.0.1', port: 7433, attached: false };
  it('stopped, starting, running on host:port, crashed with the restart countdown', () => {
    assert.equal(statusText({ state: 'stopped' } as Snapshot).text, '$(debug-stop) Quayside: stopped');
    assert.equal(statusText({ state: 'starting' } as Snapshot).text, '$(sync~spin) Quayside: starting…');
    assert.equal(statusText({ state: 'running', endpoint: ep } as Snapshot).text, '$(pass-filled) Quayside: 127.0.0.1:7433');
    const crashed = statusText({ state: 'crashed', restartAt: 5_500 } as Snapshot, 1_000);
    assert.deepEqual([crashed.text, crashed.warning], ['$(error) Quayside: crashed (restart in 5s)', true]);
  });

  it('with quayside.url set, stopped reads detached and starting attaching (that emulator runs on its own); a failure still reads stopped', () => {
    const url = 'ws://10.0.0.5:7433';
    const detached = statusText({ state: 'stopped' } as Snapshot, 0, url);
    assert.equal(detached.text, '$(debug-disconnect) Quayside: detached');
    assert.match(detached.tooltip, /Not attached to the emulator at ws:\/\/10\.0\.0\.5:7433 \(it runs on its own\) — click to attach/);
    assert.equal(statusText({ state: 'starting' } as Snapshot, 0, url).text, '$(sync~spin) Quayside: attaching…');
    assert.equal(statusText({ state: 'stopping' } as Snapshot, 0, url).text, '$(sync~spin) Quayside: detaching…');
    assert.equal(statusText({ state: 'stopping' } as Snapshot).text, '$(sync~spin) Quayside: stopping…');
    const failed = statusText({ state: 'stopped', error: { code: 'attach_failed', message: 'ECONNREFUSED' } } as Snapshot, 0, url);
    assert.deepEqual([failed.text, failed.warning], ['$(debug-stop) Quayside: stopped', true]);
    assert.match(statusText({ state: 'running', endpoint: { ...ep, attached: true } } as Snapshot, 0, url).tooltip, /attached at ws:\/\/127\.0\.0\.1:7433/);
    // Lost: we do not restart someone else's emulator, we attach to it again.
    const lost = statusText({ state: 'crashed', restartAt: 4_000 } as Snapshot, 1_000, url);
    assert.deepEqual([lost.text, lost.warning], ['$(error) Quayside: lost (attaching again in 3s)', true]);
    assert.match(lost.tooltip, /Click to attach now$/);
    assert.equal(statusText({ state: 'crashed' } as Snapshot, 0, url).text, '$(error) Quayside: lost');
  });
});
