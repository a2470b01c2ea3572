import { Engine } from './engine/engine';
import { QuaysideError } from './errors';
import { SystemClock, VirtualClock, type Clock, type VirtualClockControl, type VirtualClockOption } from './engine/clock';
import { Store } from './store/store';
import { QuaysideServer } from './server/server';
import { envHttpRoutes } from './http/env-api';
import { DEFAULT_PORT } from './protocol';

export interface EmulatorOptions {
  /** 0 (the default here) picks a free port. */
  port?: number;
  host?: string;
  /** Keep data in this directory (a `quayside.db` file); without it, data lives in memory. */
  dataDir?: string;
  /** Force an in-memory database even if dataDir is given. */
  memory?: boolean;
  /** 'virtual' gives a clock that only `clock.advance(ms)` moves. A number is a virtual start time. */
  clock?: 'system' | VirtualClockOption;
  /** The read-write token to accept (default: kept from the data directory, or a new one). */
  token?: string;
  /** The cache free tier: 1,000 messages a day per namespace (or this many), then 429 until 00:00 UTC. */
  freeTier?: boolean | number;
  /** 'full' adds an fsync per group commit (power-loss safety); 'normal' survives kill -9. */
  durability?: 'normal' | 'full';
  log?: (line: string) => void;
}

export type { VirtualClockControl, VirtualClockOption };

export interface Emulator {
  /** `ws://127.0.0.1:<port>`; the same port answers HTTP. */
  url: string;
  httpUrl: string;
  host: string;
  port: number;
  /** A read-write token for every namespace. */
  token: string;
  /** Present when started with `clock: 'virtual'`. */
  clock?: VirtualClockControl;
  engine: Engine;
  /**
   * Another token, e.g. a read-only one to test what an app may not do: `access` `read` (list, peek,
   * stats, dead-letter listing) or `readwrite` (the default), for one `namespace` or all.
   */
  createToken(opts?: { access?: 'read' | 'readwrite'; namespace?: string; name?: string }): Promise<string>;
  close(): Promise<void>;
}

/** An emulator started with a virtual clock: its `clock` is always there. */
export type VirtualEmulator = Emulator & { clock: VirtualClockControl };

/** Starts an emulator in this process; what app tests call in a `before` hook. */
export function startEmulator(opts: EmulatorOptions & { clock: VirtualClockOption }): Promise<VirtualEmulator>;
export function startEmulator(opts?: EmulatorOptions): Promise<Emulator>;
export async function startEmulator(opts: EmulatorOptions = {}): Promise<Emulator> {
  const host = opts.host ?? '127.0.0.1';
  const port = opts.port ?? 0;
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new TypeError(`port must be an integer from 0 to 65535, got ${String(opts.port)}`);
  const virtual = opts.clock === 'virtual' || (typeof opts.clock === 'object' && opts.clock !== null);
  const clock: Clock = virtual ? new VirtualClock(typeof opts.clock === 'object' ? opts.clock.start : Date.now()) : new SystemClock();
  const store = new Store({ dataDir: opts.memory || !opts.dataDir ? null : opts.dataDir, durability: opts.durability });
  const quota = opts.freeTier === true ? 1000 : typeof opts.freeTier === 'number' ? opts.freeTier : null;
  const engine = new Engine({ store, clock, dailyQuota: quota });
  const token = engine.ensureAdminToken(opts.token);
  const server = new QuaysideServer({ engine, host, port, routes: envHttpRoutes(), log: opts.log });
  try {
    await server.listen();
  } catch (e) {
    await engine.close();
    store.close();
    throw e;
  }
  const { port: bound } = server.address;
  const shownHost = host.includes(':') ? `[${host}]` : host;
  let closed: Promise<void> | null = null;
  const emu: Emulator = {
    url: `ws://${shownHost}:${bound}`,
    httpUrl: `http://${shownHost}:${bound}`,
    host,
    port: bound,
    token,
    engine,
    createToken: async (o = {}) => {
      if (o === null || typeof o !== 'object') throw new QuaysideError('invalid_argument', 'createToken takes { access?, namespace?, name? }');
      const access = o.access ?? 'readwrite';
      return engine.createToken(access, o.namespace ?? null, o.name ?? `test-${access}`);
    },
    close: () => {
      closed ??= (async () => {
        await server.close();
        await engine.close();
        store.close();
      })();
      return closed;
    },
  };
  if (virtual) emu.clock = { now: () => clock.now(), advance: (ms: number) => engine.advance(ms) };
  return emu;
}

export { DEFAULT_PORT };
export { QuaysideError } from './errors';
