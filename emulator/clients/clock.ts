// The clock of an emulator this process did not start: a test runner's global setup started it
// (jest's globalSetup, vitest's, mocha's mochaGlobalSetup) and the tests, in their workers, move its
// virtual time. In the process that started it, `emu.clock` does the same.
import { EMULATOR_HANDLE_KEYS, onlyKeys, optObject } from './common';
import { Connection } from './connection';
import { checkConnectionOptions } from './transport';

export interface RemoteClock {
  /** The emulator's time, epoch ms. */
  now(): Promise<number>;
  /**
   * Moves a virtual clock on by `ms` and resolves with the new time once the work that fell due was
   * applied, as `emu.clock.advance` does. An emulator on the system clock refuses (`conflict`).
   */
  advance(ms: number): Promise<number>;
  /** Lets go of the connection (an idle one does not hold the process either); later calls fail `unavailable`. */
  close(): Promise<void>;
}

/**
 * `url` and `token` default to QUAYSIDE_URL and QUAYSIDE_TOKEN, as every client's do; the rest of an
 * emulator handle is taken and ignored, as by the others (`connectClock(emu)`).
 */
export function connectClock(opts: { url?: string; token?: string } = {}): RemoteClock {
  const o = optObject(opts, 'connectClock options') ?? {};
  onlyKeys(o, ['url', 'token'], 'connectClock', EMULATOR_HANDLE_KEYS);
  checkConnectionOptions(o);
  const conn = new Connection({ url: o.url as string | undefined, token: o.token as string | undefined, client: 'quayside-clock' });
  return {
    now: async () => (await conn.request('clock.now', {})).now,
    advance: async (ms: number) => (await conn.request('clock.advance', { ms })).now,
    close: () => conn.close(),
  };
}
