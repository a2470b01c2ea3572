// The clock of an emulator this process did not start: a test runner's global setup started it
// (jest's globalSetup, vitest's, mocha's mochaGlobalSetup) and the tests, in their workers, move its
// virtual time. In the process that started it, `emu.clock` does the same.
import { QuaysideError } from '../errors';
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
  /** Lets go of the connection (an idle one does not hold the process either). */
  close(): Promise<void>;
}

/** `url` and `token` default to QUAYSIDE_URL and QUAYSIDE_TOKEN, as every client's do. */
export function connectClock(opts: { url?: string; token?: string } = {}): RemoteClock {
  if (opts === null || typeof opts !== 'object') throw new QuaysideError('invalid_argument', 'connectClock: options must be an object');
  for (const k of Object.keys(opts)) if (k !== 'url' && k !== 'token') throw new QuaysideError('invalid_argument', `connectClock: unknown option "${k}"; expected url, token`);
  checkConnectionOptions(opts);
  const conn = new Connection({ url: opts.url, token: opts.token, client: 'quayside-clock' });
  return {
    now: async () => (await conn.request('clock.now', {})).now,
    advance: async (ms: number) => (await conn.request('clock.advance', { ms })).now,
    close: () => conn.close(),
  };
}
