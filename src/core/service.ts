// The emulator as the extension sees it: the lifecycle, what to launch (from the settings), and
// the connection to whatever runs. No VS Code here: settings come in through `getConfig`.
import * as crypto from 'crypto';
import * as fs from 'fs';
import { Connection } from '../../emulator/clients/connection';
import type { Transport } from '../../emulator/clients/transport';
import { LaunchError, Lifecycle, type Endpoint, type ExitInfo, type Instance, type LaunchContext, type LifecycleOptions, type Snapshot } from './lifecycle';
import { locateEmulator, resolveNode, type EmulatorSource } from './locate';
import { attachEmulator, probeNode, spawnEmulator } from './process';
import { SwitchingTransport } from './switching';

export interface EmulatorConfig {
  /** Attach to this emulator instead of starting one. */
  url: string;
  token: string;
  nodePath: string;
  port: number;
  host: string;
  /** Absolute data directory (ignored with memory). */
  dataDir: string;
  memory: boolean;
  clock: 'system' | 'virtual';
  restartOnCrash: boolean;
  workspaceFolders: string[];
  extensionPath: string;
  env: NodeJS.ProcessEnv;
  cwd?: string;
}

export interface LaunchInfo {
  mode: 'spawn' | 'attach';
  source?: EmulatorSource | 'attached';
  nodePath?: string;
  cliPath?: string;
  /** The workspace folder whose copy ran (source 'workspace'). */
  folder?: string;
  port?: number;
  url?: string;
}

/**
 * The settings an emulator reads only when it starts (not autoStart, not restartOnCrash) that a
 * restart would change: those whose value now differs from the one `ran` was launched with, counted
 * as they apply to what the restart launches. An attach uses only url and token; an emulator the
 * extension starts uses no token (it makes its own), and no data directory in memory. A value written again, or a setting
 * removed whose default is the value, is no change.
 */
export function settingsNeedingRestart(ran: EmulatorConfig, now: EmulatorConfig): string[] {
  const changed: string[] = [];
  const differs = (key: string, a: unknown, b: unknown) => {
    if (a !== b && !(Number.isNaN(a) && Number.isNaN(b))) changed.push(`quayside.${key}`);
  };
  differs('url', ran.url, now.url);
  // A restart that attaches uses only url and token; one that starts an emulator, no token.
  if (now.url) {
    differs('token', ran.token, now.token);
    return changed;
  }
  differs('nodePath', ran.nodePath, now.nodePath);
  differs('port', ran.port, now.port);
  if (!now.memory) differs('dataDir', ran.dataDir, now.dataDir); // in memory, a restart has none
  differs('inMemory', ran.memory, now.memory);
  differs('clock', ran.clock, now.clock);
  return changed;
}

/** Why a quayside.port cannot be listened on, or null: 0 (a free port) to 65535, a whole number. */
export function portProblem(port: number): string | null {
  return Number.isInteger(port) && port >= 0 && port <= 65535 ? null : `"quayside.port" must be a whole number from 0 to 65535 (0: a free port), and it is ${Number.isNaN(port) ? 'not a number' : port}`;
}

export interface ServiceOptions {
  getConfig: () => EmulatorConfig;
  log?: (line: string) => void;
  /** A warning the emulator gave as it started (its stderr `quayside: warning: …`), for the user to see. */
  warn?: (message: string) => void;
  lifecycle?: Partial<Omit<LifecycleOptions, 'launch'>>;
  /** For tests: replace how an instance is made. */
  launchOverride?: (cfg: EmulatorConfig, ctx: LaunchContext, info: LaunchInfo) => Promise<Instance>;
  exists?: (p: string) => boolean;
  makeConnection?: (ep: Endpoint) => Transport;
}

export class EmulatorService {
  readonly lifecycle: Lifecycle;
  /** The one transport everything holds; it follows the running emulator. */
  readonly transport = new SwitchingTransport();
  private connection: Transport | undefined;
  /** The token the extension gives the emulators it starts (kept across restarts). */
  readonly token = crypto.randomBytes(24).toString('base64url');
  private portOverride: number | undefined;
  /** The port a start on a free port got: later starts keep it (copied settings stay valid). */
  private keptPort: number | undefined;
  /** Whether the last launch asked for a free port (0). */
  private askedFree = false;
  lastLaunch: LaunchInfo | undefined;
  /** The quayside.url of the emulator last attached to: attaching there again reuses its token. */
  private attachedUrl: string | undefined;
  /**
   * The settings the emulator that runs (or starts) was launched with: its crash restarts launch
   * with them again, and the settings changed since then are what a restart would apply.
   */
  private launchedWith: EmulatorConfig | undefined;
  private readonly opts: ServiceOptions;
  private readonly exists: (p: string) => boolean;

  constructor(opts: ServiceOptions) {
    this.opts = opts;
    this.exists = opts.exists ?? ((p) => fs.existsSync(p));
    const log = opts.log ?? (() => undefined);
    this.lifecycle = new Lifecycle({
      ...opts.lifecycle,
      // Asked at each crash: turning restartOnCrash off (or on) applies without a window reload.
      maxRestarts: opts.lifecycle?.maxRestarts ?? (() => (opts.getConfig().restartOnCrash ? 5 : 0)),
      // An attached emulator may be paused in a debugger or restarted by its owner: keep re-attaching.
      restartWithoutLimit: opts.lifecycle?.restartWithoutLimit ?? (() => this.attaches(true)),
      attaching: opts.lifecycle?.attaching ?? ((attempt) => this.attaches(attempt > 0)),
      launch: (ctx) => this.launch(ctx),
    });
    this.lifecycle.onLog(log);
    this.lifecycle.onDidChange((s) => this.onState(s));
  }

  get state() {
    return this.lifecycle.state;
  }

  snapshot(): Snapshot {
    return this.lifecycle.snapshot();
  }

  /**
   * Start; `port` overrides the setting (0 = a free port) for this start, its crash restarts and
   * later restarts or starts, until another `port` or a change of the settings (`settingsChanged`).
   */
  start(opts: { port?: number } = {}): Promise<Snapshot> {
    this.choosePort(opts);
    return this.lifecycle.start();
  }

  /** The settings changed: they win again over a port chosen for one start. */
  settingsChanged(): void {
    this.portOverride = undefined;
    this.keptPort = undefined;
  }

  stop(): Promise<void> {
    return this.lifecycle.stop();
  }

  /** Stop and start again (`port` as for start); the Restart command runs this. */
  restart(opts: { port?: number } = {}): Promise<Snapshot> {
    this.choosePort(opts);
    return this.lifecycle.restart();
  }

  private choosePort(opts: { port?: number }): void {
    if (opts.port === undefined) return;
    this.portOverride = opts.port;
    this.keptPort = undefined;
  }

  /**
   * The settings changed since the emulator that runs (or starts) was launched, that a restart would
   * apply (settingsNeedingRestart); none when nothing runs or starts.
   */
  pendingSettings(): string[] {
    if (this.state !== 'running' && this.state !== 'starting' && this.state !== 'crashed') return [];
    return this.launchedWith ? settingsNeedingRestart(this.launchedWith, this.opts.getConfig()) : [];
  }

  /**
   * The settings a launch uses. A crash restart brings back the emulator that ran, with the settings
   * it ran with: a change the user has not applied yet (the restart prompt waits for them) must not
   * half-apply behind their back (a new data directory on the old port, a local emulator in place of
   * the attached one). Only restartOnCrash is read fresh (by the lifecycle). Attaching again after a
   * loss goes back to the same url, with the token setting as it reads now while that url is still
   * the setting: the emulator's owner may have restarted it with another token.
   */
  private configFor(crashRestart: boolean): EmulatorConfig {
    const now = this.opts.getConfig();
    const ran = this.launchedWith;
    if (!crashRestart || !ran) return now;
    if (!ran.url) return ran;
    return { ...ran, token: now.url.trim() === ran.url.trim() ? now.token : ran.token };
  }

  /** Whether a launch attaches (its settings as configFor gives them). */
  private attaches(crashRestart: boolean): boolean {
    return this.configFor(crashRestart).url.trim() !== '';
  }

  /** quayside.url when set: the extension then attaches to that emulator instead of starting one. */
  get attachUrl(): string | undefined {
    return this.opts.getConfig().url.trim() || undefined;
  }

  /**
   * The url of the emulator the run under way attaches to (running, stopping, crashed, or starting
   * again after a crash), else quayside.url: what the status bar and the welcome speak of. A
   * setting changed meanwhile applies at the next start, not to the run that is under way.
   */
  get runAttachUrl(): string | undefined {
    const s = this.lifecycle.snapshot();
    const underWay = s.state === 'running' || s.state === 'stopping' || s.state === 'crashed' || (s.state === 'starting' && s.restarts > 0);
    return underWay && this.launchedWith ? this.launchedWith.url.trim() || undefined : this.attachUrl;
  }

  async dispose(): Promise<void> {
    await this.lifecycle.dispose();
    await this.setConnection(undefined);
  }

  private async launch(ctx: LaunchContext): Promise<Instance> {
    const cfg = this.configFor(ctx.attempt > 0);
    this.launchedWith = cfg;
    const log = this.opts.log ?? (() => undefined);
    const url = cfg.url.trim();
    if (url) {
      const info: LaunchInfo = { mode: 'attach', source: 'attached', url };
      this.lastLaunch = info;
      // Attaching again after the emulator was lost reads the setting, as a start does; where it
      // reads empty (a remote window may come to read the machine-scoped quayside.token so), it
      // goes back with the token that attached. No emulator takes an empty token.
      const prev = ctx.attempt > 0 && ctx.previous?.attached && this.attachedUrl === info.url ? ctx.previous.token : '';
      const token = cfg.token || prev;
      log(`attaching to the emulator at ${info.url}`);
      if (this.opts.launchOverride) return this.opts.launchOverride({ ...cfg, token }, ctx, info);
      return attachEmulator(info.url!, token || undefined);
    }
    const sameRun = ctx.attempt > 0 && ctx.previous && !ctx.previous.attached;
    const asked = sameRun ? ctx.previous!.port : this.portOverride ?? cfg.port;
    const bad = portProblem(asked);
    if (bad) throw new LaunchError('bad_port', bad);
    this.askedFree = asked === 0;
    // A free port once found is kept; another free one only if it has been taken since.
    const kept = asked === 0 ? this.keptPort : undefined;
    const port = kept ?? asked;
    const info: LaunchInfo = { mode: 'spawn', port, nodePath: cfg.nodePath };
    this.lastLaunch = info;
    const node = resolveNode({ nodePath: cfg.nodePath, env: cfg.env, exists: this.exists });
    if (!node) {
      throw new LaunchError('node_not_found', cfg.nodePath.includes('/') || cfg.nodePath.includes('\\') ? `"${cfg.nodePath}" does not exist` : `"${cfg.nodePath}" is not on PATH`);
    }
    info.nodePath = node;
    const located = locateEmulator({ workspaceFolders: cfg.workspaceFolders, extensionPath: cfg.extensionPath, exists: this.exists });
    if (!located.found) throw new LaunchError('emulator_not_found', `looked for ${located.tried.join(', ')}`);
    info.source = located.found.source;
    info.cliPath = located.found.cliPath;
    info.folder = located.found.folder;
    // The emulator runs in the first folder and reads its quayside.json only: say so of the others'
    // (once a start, not again at each crash restart).
    for (const other of ctx.attempt === 0 ? cfg.workspaceFolders.slice(1) : []) {
      if (this.exists(`${other}/quayside.json`)) log(`${other}/quayside.json is not applied: the emulator runs in the first workspace folder, ${cfg.workspaceFolders[0]}, and reads the quayside.json there`);
    }
    const run = async (p: number): Promise<Instance> => {
      info.port = p;
      if (this.opts.launchOverride) return this.opts.launchOverride(cfg, ctx, info);
      const version = await probeNode(node);
      log(`node ${version} at ${node}; emulator: ${located.found!.source} copy ${located.found!.cliPath}`);
      log(`data: ${cfg.memory ? 'in memory' : cfg.dataDir}; port ${p === 0 ? '(a free one)' : p}${cfg.clock === 'virtual' ? '; virtual clock' : ''}`);
      return spawnEmulator({
        nodePath: node,
        cliPath: located.found!.cliPath,
        source: located.found!.source,
        port: p,
        host: cfg.host,
        dataDir: cfg.dataDir,
        memory: cfg.memory,
        token: this.token,
        clock: cfg.clock,
        cwd: cfg.cwd ?? cfg.workspaceFolders[0],
        env: cfg.env,
        log: (line, stream) => {
          log(`${stream === 'stderr' ? '[emulator:err]' : '[emulator]'} ${line}`);
          const warning = stream === 'stderr' ? warningOf(line) : null;
          if (warning) this.opts.warn?.(warning);
        },
      });
    };
    if (kept === undefined) return run(port);
    // A taken port shows only when the emulator fails to listen (its `ready`), not from run().
    return onPortTaken(await run(kept), () => {
      log(`port ${kept}, the free port it had before, is taken now; picking another free one`);
      return run(0);
    });
  }

  private onState(s: Snapshot): void {
    if (s.state === 'running' && s.endpoint) {
      const ep = s.endpoint;
      if (!ep.attached && this.askedFree) this.keptPort = ep.port;
      if (ep.attached) this.attachedUrl = this.lastLaunch?.url;
      // An attached emulator's endpoint carries the token its attach used.
      const token = ep.attached ? ep.token || undefined : ep.token || this.token;
      const conn = this.opts.makeConnection
        ? this.opts.makeConnection({ ...ep, token: token ?? '' })
        : new Connection({ url: ep.url, token, client: 'vscode' });
      void this.setConnection(conn);
    } else if (s.state !== 'running') {
      void this.setConnection(undefined);
    }
  }

  private async setConnection(c: Transport | undefined): Promise<void> {
    const old = this.connection;
    if (old === c) return;
    this.connection = c;
    this.transport.set(c);
    if (old) await old.close().catch(() => undefined);
  }

  /** `QUAYSIDE_URL=… QUAYSIDE_TOKEN=…` for the running emulator, or undefined. */
  connectionSettings(): string | undefined {
    const s = this.snapshot();
    if (s.state !== 'running' || !s.endpoint) return undefined;
    const token = s.endpoint.token || (s.endpoint.attached ? '' : this.token);
    return `QUAYSIDE_URL=${s.endpoint.url}${token ? ` QUAYSIDE_TOKEN=${token}` : ''}`;
  }
}

/**
 * `first`, unless it fails to listen because its port is taken: then `fallback()` is launched in
 * its place, and the instance returned follows whichever runs. A stop during the switch stops both.
 */
export function onPortTaken(first: Instance, fallback: () => Promise<Instance>): Instance {
  let current = first;
  let stopped = false;
  let resolveExit!: (i: ExitInfo) => void;
  const exited = new Promise<ExitInfo>((r) => (resolveExit = r));
  const follow = (i: Instance) => void i.exited.then(resolveExit, () => resolveExit({ code: null, signal: null }));
  const ready = first.ready.then(
    (ep) => {
      follow(first);
      return ep;
    },
    async (e: unknown) => {
      if (stopped || !(e instanceof LaunchError) || e.code !== 'port_in_use') {
        follow(first);
        throw e;
      }
      await first.stop().catch(() => undefined);
      const next = await fallback();
      current = next;
      follow(next);
      if (stopped) await next.stop().catch(() => undefined);
      return next.ready;
    },
  );
  ready.catch(() => undefined);
  return {
    ready,
    exited,
    stop: async () => {
      stopped = true;
      await current.stop();
    },
  };
}

/** The text of a warning the emulator's CLI wrote to stderr (`quayside: warning: …`), or null. */
export function warningOf(line: string): string | null {
  const m = /^quayside: warning: (.+)$/.exec(line.trim());
  return m ? m[1] : null;
}
