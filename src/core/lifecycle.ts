// The emulator's lifecycle as a small state machine, with no VS Code in it:
//
//   stopped --start--> starting --ready--> running --stop--> stopping --> stopped
//                         |  \--failed--> stopped (error kept)     |
//                         \--stop--> stopping --> stopped          \--exit--> crashed --back-off--> starting
//
// A crash that is not restarted (restarts off, too many in a row, or a restart failing in a way no
// retry fixes) stays `crashed` with no `restartAt`, its error saying why. A start asked for while an
// automatic restart is pending or under way replaces it with a fresh attempt 0.
//
// What gets started is behind `launch` (a child process, or an attachment to a running emulator),
// so the machine is unit-tested with fake instances. The status bar, the tree and the log listen
// to `onDidChange` / `onLog`.

export type EmulatorState = 'stopped' | 'starting' | 'running' | 'stopping' | 'crashed';

/** Where a running emulator answers. */
export interface Endpoint {
  url: string;
  http: string;
  token: string;
  host: string;
  port: number;
  pid?: number;
  /** True when we attached to an emulator we did not start. */
  attached: boolean;
  /** Which emulator was run ('workspace' / 'packaged'), or 'attached'. */
  source?: string;
  clock?: 'system' | 'virtual';
}

/** A failure with a stable code (the CLI's error codes plus the extension's own). */
export class LaunchError extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly detail?: string,
  ) {
    super(message);
    this.name = 'LaunchError';
  }
}

export interface ExitInfo {
  code: number | null;
  signal: string | null;
  /** Why it ended, when an exit code does not say it (an attached emulator's connection dropped). */
  reason?: string;
}

/** One run of the emulator. */
export interface Instance {
  /** Resolves when it listens; rejects (a LaunchError) when it fails before that. */
  readonly ready: Promise<Endpoint>;
  /** Resolves when it has ended, whoever ended it. */
  readonly exited: Promise<ExitInfo>;
  /** Ask it to end; resolves once it has. */
  stop(): Promise<void>;
}

export interface LaunchContext {
  /** 0 for a start asked for by the user; n for the n-th automatic restart after a crash. */
  attempt: number;
  /** The endpoint of the previous run (a restart reuses its port). */
  previous?: Endpoint;
}

export type Launch = (ctx: LaunchContext) => Promise<Instance>;

export interface Snapshot {
  state: EmulatorState;
  endpoint?: Endpoint;
  /** Why the last start failed, or why the emulator crashed. */
  error?: { code: string; message: string; detail?: string };
  /** crashed: when the next automatic restart is due (epoch ms); absent when none is. */
  restartAt?: number;
  /** Automatic restarts since the last manual start or the last stable run. */
  restarts: number;
}

export interface LifecycleOptions {
  launch: Launch;
  /** Delay before the n-th automatic restart (n from 1). Default 1 s, 2 s, 4 s … capped at 30 s. */
  backoffMs?: (n: number) => number;
  /**
   * Give up after this many automatic restarts in a row. Default 5. A function is asked at each
   * crash, so a setting changed while the emulator runs counts from the next crash.
   */
  maxRestarts?: number | (() => number);
  /**
   * Asked when `maxRestarts` is reached: true to go on restarting at the capped back-off (the
   * extension says so for an attached emulator, which may just be paused at a breakpoint or
   * restarted by its owner). Permanent failures and `maxRestarts: 0` still stop it. Default: never.
   */
  restartWithoutLimit?: () => boolean;
  /** A run at least this long resets the restart count. Default 60 s. */
  stableMs?: number;
  /**
   * Whether the launch of this attempt attaches to an emulator that runs on its own, for the log's
   * words ("could not attach", not "did not start"). Default: never.
   */
  attaching?: (attempt: number) => boolean;
  now?: () => number;
  setTimer?: (fn: () => void, ms: number) => unknown;
  clearTimer?: (t: unknown) => void;
}

/** Failure codes that a retry cannot fix; a crash-restart that hits one stops retrying. */
const PERMANENT = new Set(['node_not_found', 'node_too_old', 'emulator_not_found', 'native_module', 'data_dir', 'usage', 'unauthorized', 'config', 'bad_port']);

/**
 * What Toggle (the status bar item) does in a state: stop what runs or starts, start what is stopped
 * or crashed (a pending restart is replaced by a start now), and nothing while it stops (a second
 * click on "stopping" is not a request to start again).
 */
export function toggleAction(state: EmulatorState): 'start' | 'stop' | 'none' {
  if (state === 'running' || state === 'starting') return 'stop';
  return state === 'stopping' ? 'none' : 'start';
}

export function defaultBackoff(n: number): number {
  return Math.min(30_000, 1000 * 2 ** Math.max(0, n - 1));
}

export function toFailure(e: unknown): { code: string; message: string; detail?: string } {
  if (e instanceof LaunchError) return { code: e.code, message: e.message, detail: e.detail };
  const err = e as { code?: unknown; message?: unknown };
  return { code: typeof err?.code === 'string' ? err.code : 'failed', message: typeof err?.message === 'string' ? err.message : String(e) };
}

export class Lifecycle {
  private _state: EmulatorState = 'stopped';
  private endpoint?: Endpoint;
  private lastEndpoint?: Endpoint;
  private error?: Snapshot['error'];
  private restartAt?: number;
  private restarts = 0;
  private gen = 0;
  private instance?: Instance;
  private launching?: Promise<Instance | undefined>;
  private startPromise?: Promise<Snapshot>;
  /** The attempt `startPromise` is for: 0 when the user asked for it, n for an automatic restart. */
  private startAttempt = 0;
  private stopPromise?: Promise<void>;
  private timer: unknown;
  private runningSince = 0;
  private readonly changeListeners = new Set<(s: Snapshot) => void>();
  private readonly logListeners = new Set<(line: string) => void>();
  private readonly launch: Launch;
  private readonly backoff: (n: number) => number;
  private readonly maxRestartsOf: () => number;
  private readonly restartWithoutLimit: () => boolean;
  private readonly attaching: (attempt: number) => boolean;
  private readonly stableMs: number;
  private readonly now: () => number;
  private readonly setTimer: (fn: () => void, ms: number) => unknown;
  private readonly clearTimer: (t: unknown) => void;
  private disposed = false;

  constructor(opts: LifecycleOptions) {
    this.launch = opts.launch;
    this.backoff = opts.backoffMs ?? defaultBackoff;
    const max = opts.maxRestarts ?? 5;
    this.maxRestartsOf = typeof max === 'function' ? max : () => max;
    this.restartWithoutLimit = opts.restartWithoutLimit ?? (() => false);
    this.attaching = opts.attaching ?? (() => false);
    this.stableMs = opts.stableMs ?? 60_000;
    this.now = opts.now ?? Date.now;
    this.setTimer = opts.setTimer ?? ((fn, ms) => setTimeout(fn, ms));
    this.clearTimer = opts.clearTimer ?? ((t) => clearTimeout(t as NodeJS.Timeout));
  }

  get state(): EmulatorState {
    return this._state;
  }

  snapshot(): Snapshot {
    const s: Snapshot = { state: this._state, restarts: this.restarts };
    if (this.endpoint && this._state === 'running') s.endpoint = this.endpoint;
    if (this.error) s.error = this.error;
    if (this.restartAt !== undefined && this._state === 'crashed') s.restartAt = this.restartAt;
    return s;
  }

  onDidChange(listener: (s: Snapshot) => void): () => void {
    this.changeListeners.add(listener);
    return () => this.changeListeners.delete(listener);
  }

  onLog(listener: (line: string) => void): () => void {
    this.logListeners.add(listener);
    return () => this.logListeners.delete(listener);
  }

  log(line: string): void {
    for (const l of this.logListeners) l(line);
  }

  /**
   * Start: a no-op while running, and joins a start the user already asked for. A pending or ongoing
   * automatic restart is replaced by a fresh attempt 0 (the restart count reset), so the caller
   * alone reports how it went, and a failure is not retried behind the user's back.
   * Resolves with the outcome: running; stopped with the error when it failed; or, when a stop()
   * overtook it, the state that stop left (stopping or stopped).
   */
  async start(): Promise<Snapshot> {
    // Looped: while we wait for a stop, another caller may have started (or disposed) already.
    for (;;) {
      if (this.disposed) return this.snapshot();
      if (this._state === 'running') return this.snapshot();
      if (this._state === 'starting' && this.startPromise) {
        if (this.startAttempt === 0) return this.startPromise;
        // Stopped first: a half-started restart would hold the port the new attempt needs.
        this.log('a manual start replaces the automatic restart under way');
        await this.stop();
        continue;
      }
      if (this._state !== 'stopping' || !this.stopPromise) break;
      await this.stopPromise;
    }
    this.cancelTimer();
    this.restarts = 0;
    return this.begin(0);
  }

  /** Stop whatever runs (or is starting, or waits to restart). */
  async stop(): Promise<void> {
    const pending = this.restartAt !== undefined;
    this.cancelTimer();
    if (this._state === 'stopped') return;
    if (this._state === 'stopping') return this.stopPromise;
    if (this._state === 'crashed') {
      // Said, or the log's last line ("restarting in 4 s") would promise a restart that never comes.
      this.log(pending ? 'stopped; the pending restart is cancelled' : 'stopped');
      this.set('stopped');
      return;
    }
    const wasStarting = this._state === 'starting';
    const wasAttached = this.endpoint?.attached === true;
    this.gen++;
    const inst = this.instance;
    const launching = this.launching;
    this.instance = undefined;
    this.set('stopping');
    this.log(wasStarting ? 'stopping the emulator while it starts' : 'stopping the emulator');
    this.stopPromise = (async () => {
      try {
        const i = inst ?? (await launching?.catch(() => undefined));
        if (i) await i.stop();
      } catch (e) {
        this.log(`while stopping: ${toFailure(e).message}`);
      }
      this.endpoint = undefined;
      this.stopPromise = undefined;
      this.log(wasAttached ? 'detached from the emulator (it goes on running)' : 'stopped');
      this.set('stopped');
    })();
    return this.stopPromise;
  }

  async restart(): Promise<Snapshot> {
    await this.stop();
    return this.start();
  }

  /** Stop and refuse further starts (the window is closing). */
  async dispose(): Promise<void> {
    this.disposed = true;
    await this.stop();
    this.changeListeners.clear();
    this.logListeners.clear();
  }

  private begin(attempt: number): Promise<Snapshot> {
    const gen = ++this.gen;
    this.error = undefined;
    this.restartAt = undefined;
    this.startAttempt = attempt;
    this.set('starting');
    const max = this.maxRestartsOf();
    // An attached emulator is attached again without a limit: no "attempt 5 of 5" before a sixth.
    const of = attempt <= max && !this.restartWithoutLimit() ? ` of ${max}` : '';
    const again = this.attaching(attempt) ? 'attaching to the emulator again' : 'restarting the emulator';
    this.log(attempt === 0 ? 'starting the emulator' : `${again} (attempt ${attempt}${of})`);
    const p = (async (): Promise<Snapshot> => {
      const launching = this.launch({ attempt, previous: this.lastEndpoint });
      this.launching = launching;
      let inst: Instance | undefined;
      try {
        inst = await launching;
      } catch (e) {
        if (gen !== this.gen) return this.snapshot();
        return this.failStart(e, attempt);
      } finally {
        if (this.launching === launching) this.launching = undefined;
      }
      if (!inst) return this.snapshot();
      if (gen !== this.gen) return this.dropStale(inst);
      this.instance = inst;
      const launched = inst;
      inst.exited.then(
        (info) => this.onExit(gen, launched, info),
        () => this.onExit(gen, launched, { code: null, signal: null }),
      );
      let ep: Endpoint;
      try {
        ep = await inst.ready;
      } catch (e) {
        if (gen !== this.gen) return this.dropStale(inst);
        this.instance = undefined;
        await inst.stop().catch(() => undefined);
        return this.failStart(e, attempt);
      }
      if (gen !== this.gen) return this.dropStale(inst);
      this.endpoint = ep;
      this.lastEndpoint = ep;
      this.runningSince = this.now();
      this.set('running');
      this.log(`running on ${ep.url}${ep.pid ? ` (pid ${ep.pid})` : ''}${ep.attached ? ' (attached)' : ''}`);
      return this.snapshot();
    })();
    this.startPromise = p;
    void p.finally(() => {
      if (this.startPromise === p) this.startPromise = undefined;
    });
    return p;
  }

  /**
   * A launch that something newer superseded (a stop, or another start). Whoever did may not know
   * about this instance, so stop it here; Instance.stop() is idempotent.
   */
  private dropStale(inst: Instance): Snapshot {
    void inst.stop().catch((e) => this.log(`while stopping a superseded launch: ${toFailure(e).message}`));
    return this.snapshot();
  }

  private failStart(e: unknown, attempt: number): Snapshot {
    this.error = toFailure(e);
    this.log(`${this.attaching(attempt) ? 'could not attach to the emulator' : 'the emulator did not start'}: ${this.error.message}`);
    if (attempt === 0 || this.disposed) {
      this.set('stopped');
    } else if (PERMANENT.has(this.error.code)) {
      // An automatic restart hit a failure no retry fixes: end crashed (visibly), not stopped.
      this.giveUp('gave up restarting it: a retry cannot fix this');
    } else {
      // An automatic restart failed: keep backing off.
      this.scheduleRestart();
    }
    return this.snapshot();
  }

  private onExit(gen: number, inst: Instance, info: ExitInfo): void {
    if (gen !== this.gen || this.instance !== inst) return;
    this.instance = undefined;
    if (this._state !== 'running') return; // a failure while starting is handled through `ready`
    const ranFor = this.now() - this.runningSince;
    if (ranFor >= this.stableMs) this.restarts = 0;
    this.endpoint = undefined;
    this.error = {
      code: 'crashed',
      message: info.reason ?? `the emulator exited unexpectedly (${info.signal ? `signal ${info.signal}` : `exit code ${info.code}`})`,
    };
    this.log(this.error.message);
    if (this.disposed) {
      this.set('stopped');
      return;
    }
    this.scheduleRestart();
  }

  private scheduleRestart(): void {
    const max = this.maxRestartsOf();
    if (max === 0) return this.giveUp('automatic restarts are off');
    if (this.restarts >= max && !this.restartWithoutLimit()) {
      return this.giveUp(`gave up after ${this.restarts} automatic ${this.restarts === 1 ? 'restart' : 'restarts'}`);
    }
    this.restarts++;
    const delay = this.backoff(this.restarts);
    this.restartAt = this.now() + delay;
    const gen = this.gen;
    this.log(`${this.attaching(this.restarts) ? 'attaching again' : 'restarting'} in ${Math.round(delay / 100) / 10} s`);
    this.timer = this.setTimer(() => {
      this.timer = undefined;
      if (gen !== this.gen || this._state !== 'crashed') return;
      // Turned off while this restart waited: it does not run either.
      if (this.maxRestartsOf() === 0) return this.giveUp('automatic restarts are off');
      void this.begin(this.restarts);
    }, delay);
    this.set('crashed');
  }

  /** Crashed for good: no restart is pending, and the error says why (the extension shows it with its fixes). */
  private giveUp(why: string): void {
    this.restartAt = undefined;
    const what = this.error?.message ?? 'the emulator crashed';
    this.error = { code: this.error?.code ?? 'crashed', message: `${what}; ${why}`, detail: this.error?.detail };
    this.log(`not restarting the emulator: ${why}`);
    this.set('crashed');
  }

  private cancelTimer(): void {
    if (this.timer !== undefined) this.clearTimer(this.timer);
    this.timer = undefined;
    this.restartAt = undefined;
  }

  private set(state: EmulatorState): void {
    this._state = state;
    const snap = this.snapshot();
    for (const l of this.changeListeners) {
      try {
        l(snap);
      } catch {
        /* a listener's failure is not ours */
      }
    }
  }
}
