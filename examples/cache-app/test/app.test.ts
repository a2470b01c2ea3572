import assert from 'node:assert/strict';
import { startEmulator, type Emulator } from 'quayside/emulator';
import { createCache, type Cache } from 'quayside/cache';
import { emailService } from '../app';

describe('examples/cache-app', () => {
  let emu: Emulator;
  let cache: Cache;
  before(async () => {
    emu = await startEmulator({ memory: true, clock: 'virtual' });
    cache = createCache({ url: emu.url, token: emu.token, namespace: 'cache-app' });
  });
  after(async () => {
    await cache.close();
    await emu.close();
  });

  it('sends one welcome email per sign-up, even when sign-up is retried', async () => {
    const svc = emailService(cache);
    await svc.signup('ada@example.com');
    await svc.signup('ada@example.com');
    await svc.signup('grace@example.com');
    const sent: string[] = [];
    const ac = new AbortController();
    await svc.worker({ async send(to) { sent.push(to); if (sent.length === 2) ac.abort(); } }, ac.signal);
    assert.deepEqual(sent, ['ada@example.com', 'grace@example.com']);
  });

  it('a mailer that keeps failing ends in the dead letters, and replay sends it again', async () => {
    const svc = emailService(cache);
    await svc.signup('bounce@example.com');
    let tries = 0;
    const ac = new AbortController();
    await svc.worker({ async send() { if (++tries === 5) ac.abort(); throw new Error('smtp down'); } }, ac.signal);
    const dead = await svc.failed();
    assert.deepEqual(dead.messages.map((m) => [m.reason, m.attempts]), [['nack', 5]]);
    await svc.retryFailed();
    const sent: string[] = [];
    const again = new AbortController();
    await svc.worker({ async send(to) { sent.push(to); again.abort(); } }, again.signal);
    assert.deepEqual(sent, ['bounce@example.com']);
  });
});
