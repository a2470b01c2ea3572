import { CLOCK_META, Engine } from './engine/engine';
import { QuaysideError } from './errors';
import { clockFor, clockOptionProblem, type Clock, type VirtualClockControl, type VirtualClockOption } from './engine/clock';
import { DB_FILE, Store, StoreOpenError } from './store/store';
import { QuaysideServer } from './server/server';
import { urlHost } from './server/auth';
import { envHttpRoutes } from './http/env-api';
import { DEFAULT_PORT } from './protocol';
import { applyWorkspacePlan, planWorkspaceConfig, readWorkspaceConfig } from './workspace-config';
import path from 'node:path';

export interface EmulatorOptions {
  /** 0 (the default here) picks a free port. */
  port?: number;
  host?: string;
  /** Keep data in this directory (a `quayside.db` file); without it, data lives in memory. */
  dataDir?: string;
  /** Force an in-memory database even if dataDir is given. */
  memory?: boolean;
  /** 'virtual' gives a clock that only `clock.advance(ms)` moves; `{ start }` (epoch ms) is a virtual clock starting then. */
  clock?: 'system' | VirtualClockOption;
  /** The read-write token to accept (default: kept from the data directory, or a new one). */
  token?: string;
  /** The cache free tier: 1,000 messages a day per namespace (or this many), then 429 until 00:00 UTC. */
  freeTier?: boolean | number;
  /** 'full' adds an fsync per group commit (power-loss safety); 'normal' survives kill -9. */
  durability?: 'normal' | 'full';
  /** Called with each line the emulator logs. */
  log?: (line: string) => void;
  /**
   * Queues to declare at start, as `quayside start` does with `quayside.json`: a path to such a
   * file, or its parsed content. It is checked before anything starts (`invalid_argument`); a
   * declared queue that exists with another dialect fails the start (`conflict`).
   */
  config?: string | Record<string, unknown>;
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
  checkOptions(opts);
  // Checked before the data directory is opened: a bad file starts nothing.
  const file = typeof opts.config === 'string' ? opts.config : undefined;
  const plan = opts.config === undefined ? undefined : planWorkspaceConfig(file !== undefined ? readWorkspaceConfig(path.resolve(file), file) : opts.config, file);
  const host = opts.host ?? '127.0.0.1';
  const port = opts.port ?? 0;
  const store = new Store({ dataDir: opts.memory || !opts.dataDir ? null : opts.dataDir, durability: opts.durability });
  let engine: Engine | null = null;
  let clock: Clock;
  /** The time a virtual clock reached on this data directory, if one did. */
  let saved: string | null = null;
  let token: string;
  let server: QuaysideServer;
  try {
    saved = store.getMeta(CLOCK_META);
    clock = clockFor(opts.clock, saved === null ? null : Number(saved));
    const quota = opts.freeTier === true ? 1000 : typeof opts.freeTier === 'number' ? opts.freeTier : null;
    engine = new Engine({ store, clock, dailyQuota: quota });
    try {
      token = engine.ensureAdminToken(opts.token);
    } catch (e) {
      throw e instanceof QuaysideError && e.details?.field === 'token' ? new QuaysideError(e.code, `startEmulator: token: ${e.message}`, { details: e.details }) : e;
    }
    server = new QuaysideServer({ engine, host, port, routes: envHttpRoutes(), log: opts.log });
    await server.listen();
    engine.saveClock();
  } catch (e) {
    // A failed start leaves nothing open (the store's lock is released with it), and a data
    // directory it created is removed again.
    try {
      await engine?.close({ flush: false });
    } finally {
      store.discard();
    }
    throw unwritable(e, opts.dataDir);
  }
  const { port: bound } = server.address;
  const shownHost = urlHost(host);
  let closed: Promise<void> | null = null;
  /** `discard`: the start failed after all (a declared queue it could not make), so a data directory it created goes too. */
  const shutDown = (discard: boolean) => {
    closed ??= (async () => {
      await server.close();
      await engine.close();
      if (discard) store.discard();
      else store.close();
    })();
    return closed;
  };
  const emu: Emulator = {
    url: `ws://${shownHost}:${bound}`,
    httpUrl: `http://${shownHost}:${bound}`,
    host,
    port: bound,
    token,
    engine,
    createToken: async (o = {}) => {
      if (o === null || typeof o !== 'object') throw new QuaysideError('invalid_argument', 'createToken takes { access?, namespace?, name? }');
      // A misspelt `acess: 'read'` must not hand a test a read-write token.
      const extra = Object.keys(o).find((k) => !['access', 'namespace', 'name'].includes(k) && (o as Record<string, unknown>)[k] !== undefined);
      if (extra !== undefined) throw new QuaysideError('invalid_argument', `createToken: unknown option "${extra}"; expected one of access, namespace, name`);
      const access = o.access ?? 'readwrite';
      return engine.createToken(access, o.namespace ?? null, o.name ?? `test-${access}`);
    },
    close: () => shutDown(false),
  };
  if (clock.mode === 'virtual') emu.clock = { now: () => clock.now(), advance: (ms: number) => engine.advance(ms) };
  if (plan !== undefined) {
    try {
      await applyWorkspacePlan(engine, plan);
    } catch (e) {
      await shutDown(true);
      throw e;
    }
  }
  // Said once the start stands (a start that failed has said why).
  const ahead = clockAheadWarning(clock, saved);
  if (ahead) server.log(ahead);
  return emu;
}

/**
 * A system clock cannot start before the time a virtual clock reached on this data directory (an
 * advance moved it on): what the advance made ready reads as delayed again, and leases and windows
 * taken then last that much longer, until the system clock gets there. The data is right for the
 * virtual clock, so nothing is changed: the start goes on, and says so.
 */
function clockAheadWarning(clock: Clock, saved: string | null): string | null {
  const reached = saved === null ? NaN : Number(saved);
  const ahead = reached - clock.now();
  if (clock.mode !== 'system' || !(ahead >= 1000)) return null;
  return (
    `warning: a virtual clock moved this data directory's time on to ${new Date(reached).toISOString()}, ${roughDuration(ahead)} ahead of the system clock: ` +
    'until the system clock gets there, messages an advance made ready wait as delayed, and leases and dedupe windows taken then last that much longer. ' +
    'To go on from there, start with the virtual clock (quayside start --clock virtual; in VS Code the quayside.clock setting), or use another data directory.'
  );
}

/** 2 d 3 h, 5 h 10 min, 42 min, 30 s: enough to tell a user how far. */
function roughDuration(ms: number): string {
  const s = Math.floor(ms / 1000);
  const [d, h, m] = [Math.floor(s / 86400), Math.floor((s % 86400) / 3600), Math.floor((s % 3600) / 60)];
  if (d > 0) return h > 0 ? `${d} d ${h} h` : `${d} d`;
  if (h > 0) return m > 0 ? `${h} h ${m} min` : `${h} h`;
  return m > 0 ? `${m} min` : `${s} s`;
}

/** SQLite's own "cannot write" errors, met after the store opened (a read-only file), as a StoreOpenError. */
function unwritable(e: unknown, dataDir: string | undefined): unknown {
  const code = String((e as { code?: unknown })?.code ?? '');
  if (!dataDir || !/^SQLITE_(READONLY|CANTOPEN|FULL|IOERR)/.test(code)) return e;
  return new StoreOpenError('unwritable', `the data directory ${dataDir} cannot be written (${(e as Error).message}, ${code}); check the permissions of ${DB_FILE} and the directory, and the free space`);
}

/** Every option is checked before anything starts: a typo must not quietly become a default. */
function checkOptions(opts: EmulatorOptions): void {
  const bad = (m: string) => new QuaysideError('invalid_argument', `startEmulator: ${m}`);
  if (opts === null || typeof opts !== 'object') throw bad('options must be an object');
  const known = ['port', 'host', 'dataDir', 'memory', 'clock', 'token', 'freeTier', 'durability', 'log', 'config'];
  for (const k of Object.keys(opts)) if (!known.includes(k)) throw bad(`unknown option "${k}"; expected one of ${known.join(', ')}`);
  const o = opts as Record<string, unknown>;
  if (o.port !== undefined && (!Number.isInteger(o.port) || (o.port as number) < 0 || (o.port as number) > 65535)) throw bad(`port must be an integer from 0 to 65535, got ${String(o.port)}`);
  if (o.host !== undefined && (typeof o.host !== 'string' || o.host === '')) throw bad('host must be a non-empty string');
  if (o.dataDir !== undefined && (typeof o.dataDir !== 'string' || o.dataDir === '')) throw bad('dataDir must be a non-empty string (a directory path)');
  if (o.memory !== undefined && typeof o.memory !== 'boolean') throw bad('memory must be true or false');
  const clockProblem = clockOptionProblem(o.clock);
  if (clockProblem) throw bad(clockProblem);
  if (o.token !== undefined) {
    // It travels in an HTTP Authorization header: a space or a control character could never be sent there.
    if (typeof o.token !== 'string' || !/^[\x21-\x7e]{1,200}$/.test(o.token)) throw bad('token must be 1 to 200 visible ASCII characters (no spaces), as an HTTP Bearer token can carry');
    if (o.token.startsWith('qs_ro_')) throw bad('token: a token that starts qs_ro_ reads as read-only, and this one is the emulator\'s read-write token; choose another');
  }
  if (o.freeTier !== undefined && typeof o.freeTier !== 'boolean' && !(Number.isSafeInteger(o.freeTier) && (o.freeTier as number) >= 1)) throw bad(`freeTier must be true, false or a positive whole number of messages a day, got ${String(o.freeTier)}`);
  if (o.durability !== undefined && o.durability !== 'normal' && o.durability !== 'full') throw bad(`durability must be "normal" or "full", got ${JSON.stringify(o.durability) ?? String(o.durability)}`);
  if (o.log !== undefined && typeof o.log !== 'function') throw bad('log must be a function');
  if (o.config !== undefined && (typeof o.config !== 'string' || o.config === '') && (typeof o.config !== 'object' || o.config === null || Array.isArray(o.config))) {
    throw bad('config must be the path of a quayside.json or its parsed content (an object)');
  }
}

export { DEFAULT_PORT };
export { QuaysideError } from './errors';
export { connectClock, type RemoteClock } from './clients/clock';
export type { ErrorCode } from './protocol';
/** What a start that cannot take its data directory throws: `code: 'data_dir'`, `problem` says why. */
export { StoreOpenError, type StoreOpenProblem } from './store/boundary';
