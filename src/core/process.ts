// Running the emulator as a child process under a real `node`, and attaching to one that runs.
// No VS Code here; the lifecycle drives these as `Instance`s.
import * as cp from 'child_process';
import WebSocket from 'ws';
import { encodeRequest, resolveUrl } from '../../emulator/clients/transport';
import { PROTOCOL_VERSION, type OpArgs, type OpResult, type ServerFrame } from '../../emulator/protocol';
import { LineSplitter, classifyStderr, hostPort, parseCliLine } from './cliOutput';
import { formatDuration } from './duration';
import { LaunchError, type Endpoint, type ExitInfo, type Instance } from './lifecycle';
import { MIN_NODE_MAJOR, nodeMajor, type EmulatorSource } from './locate';
import { EMULATOR_NODE_FLAGS } from '../../emulator/node-flags';

export interface SpawnOptions {
  nodePath: string;
  cliPath: string;
  source?: EmulatorSource;
  port: number;
  host?: string;
  /** Data directory; ignored with `memory`. */
  dataDir?: string;
  memory?: boolean;
  token: string;
  clock?: 'system' | 'virtual';
  cwd?: string;
  env?: NodeJS.ProcessEnv;
  /** Each line the process prints that is not its JSON event. */
  log?: (line: string, stream: 'stdout' | 'stderr') => void;
  /** How long to wait for the listening line. Default 20 s. */
  readyTimeoutMs?: number;
  /** After closing stdin, how long to wait before SIGTERM, and then before SIGKILL. */
  graceMs?: number;
  spawn?: typeof cp.spawn;
}

export function cliArgs(o: SpawnOptions): string[] {
  const args = [...EMULATOR_NODE_FLAGS, o.cliPath, 'start', '--port', String(o.port), '--host', o.host ?? '127.0.0.1'];
  if (o.memory) args.push('--memory');
  else if (o.dataDir) args.push('--data', o.dataDir);
  args.push('--token', o.token);
  if (o.clock === 'virtual') args.push('--clock', 'virtual');
  args.push('--json', '--exit-with-parent');
  return args;
}

export function spawnEmulator(o: SpawnOptions): Instance & { readonly pid: number | undefined } {
  const spawn = o.spawn ?? cp.spawn;
  const child = spawn(o.nodePath, cliArgs(o), {
    cwd: o.cwd,
    env: { ...(o.env ?? process.env), ELECTRON_RUN_AS_NODE: undefined },
    // stdin stays open: the emulator (--exit-with-parent) ends when it closes, even if we die.
    stdio: ['pipe', 'pipe', 'pipe'],
    windowsHide: true,
  });
  const log = o.log ?? (() => undefined);
  let stderrTail = '';
  let listened = false;
  let exited = false;
  let resolveReady!: (e: Endpoint) => void;
  let rejectReady!: (e: Error) => void;
  const ready = new Promise<Endpoint>((res, rej) => {
    resolveReady = res;
    rejectReady = rej;
  });
  ready.catch(() => undefined);
  let settled = false;
  const settle = (fn: () => void) => {
    if (settled) return;
    settled = true;
    clearTimeout(readyTimer);
    fn();
  };

  let resolveExit!: (i: ExitInfo) => void;
  const exitedP = new Promise<ExitInfo>((res) => (resolveExit = res));

  const out = new LineSplitter((line) => {
    const ev = parseCliLine(line);
    if (!ev) {
      if (line.trim()) log(line, 'stdout');
      return;
    }
    if (ev.event === 'listening') {
      listened = true;
      const { host, port } = hostPort(ev.url);
      settle(() =>
        resolveReady({ url: ev.url, http: ev.http, token: ev.token || o.token, host, port, pid: ev.pid || child.pid, attached: false, source: o.source, clock: ev.clock ?? o.clock ?? 'system' }),
      );
    } else {
      log(`error ${ev.code}: ${ev.message}`, 'stdout');
      // A native module that does not load is reported under other codes too (data_dir, start):
      // say what it really is, so the fix offered is the right one.
      const native = classifyStderr(ev.message);
      if (native?.code === 'native_module' && ev.code !== 'native_module') {
        settle(() => rejectReady(new LaunchError('native_module', native.message, ev.message)));
      } else {
        settle(() => rejectReady(new LaunchError(ev.code, ev.message)));
      }
    }
  });
  const err = new LineSplitter((line) => {
    stderrTail = (stderrTail + line + '\n').slice(-8000);
    if (line.trim()) log(line, 'stderr');
  });
  child.stdout?.on('data', (c: Buffer) => out.push(c));
  child.stderr?.on('data', (c: Buffer) => err.push(c));
  child.stdin?.on('error', () => undefined);

  const readyTimer = setTimeout(() => {
    settle(() => rejectReady(new LaunchError('timeout', `the emulator did not report that it listens within ${Math.round((o.readyTimeoutMs ?? 20000) / 1000)} s`, stderrTail)));
    void stop();
  }, o.readyTimeoutMs ?? 20000);

  child.on('error', (e: NodeJS.ErrnoException) => {
    if (e.code === 'ENOENT') {
      settle(() => rejectReady(new LaunchError('node_not_found', `cannot run node at "${o.nodePath}"`)));
    } else {
      settle(() => rejectReady(new LaunchError('spawn_failed', `cannot start ${o.nodePath}: ${e.message}`)));
    }
    if (!exited) {
      exited = true;
      resolveExit({ code: null, signal: null });
    }
  });
  child.on('exit', (code, signal) => {
    out.end();
    err.end();
    exited = true;
    if (!listened) {
      const known = classifyStderr(stderrTail);
      settle(() =>
        rejectReady(
          known
            ? new LaunchError(known.code, known.message, stderrTail.trim())
            : new LaunchError('exited', `the emulator exited before it listened (${signal ? `signal ${signal}` : `exit code ${code}`})`, stderrTail.trim()),
        ),
      );
    }
    resolveExit({ code, signal });
  });

  const grace = o.graceMs ?? 3000;
  let stopping: Promise<void> | undefined;
  function stop(): Promise<void> {
    if (exited) return Promise.resolve();
    if (!stopping) {
      stopping = (async () => {
        child.stdin?.end();
        const gone = (ms: number) => Promise.race([exitedP.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), ms).unref?.())]);
        if (await gone(grace)) return;
        child.kill('SIGTERM');
        if (await gone(grace)) return;
        child.kill('SIGKILL');
        await gone(grace);
      })();
    }
    return stopping;
  }

  return { ready, exited: exitedP, stop, pid: child.pid };
}

/** Check the node binary: its version, or a LaunchError saying what is wrong with it. */
export function probeNode(nodePath: string, execFile: typeof cp.execFile = cp.execFile): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(nodePath, ['--version'], { timeout: 10000, env: { ...process.env, ELECTRON_RUN_AS_NODE: undefined } }, (e, stdout) => {
      if (e) {
        const code = (e as NodeJS.ErrnoException).code;
        reject(new LaunchError('node_not_found', code === 'ENOENT' ? `no node at "${nodePath}"` : `cannot run "${nodePath} --version": ${e.message}`));
        return;
      }
      const v = String(stdout).trim();
      const major = nodeMajor(v);
      if (major === undefined) reject(new LaunchError('node_not_found', `"${nodePath}" does not look like Node.js (it printed "${v.slice(0, 80)}")`));
      else if (major < MIN_NODE_MAJOR) reject(new LaunchError('node_too_old', `the emulator needs Node ${MIN_NODE_MAJOR} or newer; "${nodePath}" is ${v}`));
      else resolve(v);
    });
  });
}

export interface AttachOptions {
  /** How long the WebSocket handshake may take, and then the answer to hello. Default 3 s. */
  connectTimeoutMs?: number;
  /** How often to ping it. Default 15 s. */
  heartbeatMs?: number;
  /**
   * How many pings in a row may go unanswered before it counts as gone. Default 3 (cut a period
   * after the third: 45 s after the first unanswered ping, 60 s after the last answer): one
   * missed pong is often a busy or briefly paused emulator (a breakpoint), not a lost one.
   */
  missedPongs?: number;
}

/**
 * An emulator someone else runs: ready once it answers hello; stop only disconnects. The hello
 * socket stays open (with WebSocket pings) so that `exited` resolves when the emulator goes away,
 * and the lifecycle treats that as a crash. (The shared Connection reconnects silently and has no
 * "dropped" notification, hence a plain socket here.)
 */
export function attachEmulator(url: string, token: string | undefined, opts: AttachOptions = {}): Instance {
  let target: string;
  try {
    target = resolveUrl(url);
  } catch (e) {
    // Not a URL at all: the same hint as an emulator that does not answer there (check quayside.url).
    throw new LaunchError('attach_failed', `cannot attach to the emulator at ${url}: ${(e as Error).message}`);
  }
  const connectTimeoutMs = opts.connectTimeoutMs ?? 3000;
  const ws = new WebSocket(target, { perMessageDeflate: false, handshakeTimeout: connectTimeoutMs });
  let attached = false;
  let stopping = false;
  let heartbeat: NodeJS.Timeout | undefined;
  let helloDeadline: NodeJS.Timeout | undefined;
  let resolveExit!: (i: ExitInfo) => void;
  const exited = new Promise<ExitInfo>((r) => (resolveExit = r));
  const ready = new Promise<Endpoint>((resolve, reject) => {
    const fail = (code: string | undefined, message: string) => {
      clearTimeout(helloDeadline);
      reject(new LaunchError(code === 'unauthorized' ? 'unauthorized' : 'attach_failed', `cannot attach to the emulator at ${url}: ${message}`));
      ws.terminate();
    };
    ws.on('error', (e) => {
      if (!attached) fail(undefined, e.message);
    });
    ws.on('open', () => {
      const args: OpArgs<'hello'> = { version: PROTOCOL_VERSION, client: 'vscode-probe' };
      if (token) args.token = token;
      ws.send(encodeRequest(1, 'hello', args));
      // Something that upgrades but never answers (not an emulator, or a hung one) must not leave the start pending.
      helloDeadline = setTimeout(() => {
        if (!attached) fail(undefined, `it did not answer hello within ${formatDuration(connectTimeoutMs)}`);
      }, connectTimeoutMs);
    });
    ws.on('message', (data) => {
      if (attached) return; // events or late answers: this socket only watches
      let frame: ServerFrame;
      try {
        frame = JSON.parse(String(data)) as ServerFrame;
      } catch {
        return;
      }
      if ('event' in frame || frame.id !== 1) return;
      if (!frame.ok) return fail(frame.error.code, frame.error.message);
      const info = frame.result as OpResult<'hello'>;
      // A read-only token would show every queue and then refuse each push, replay and purge the
      // tree and panel offer (often after a confirmation): said once, now, instead.
      if (info.access !== 'readwrite') return fail('unauthorized', 'quayside.token is a read-only token; the extension needs the read-write token the emulator printed');
      attached = true;
      clearTimeout(helloDeadline);
      const { host, port } = hostPort(target);
      resolve({ url: target, http: target.replace(/^ws/, 'http'), token: token ?? '', host, port, attached: true, source: 'attached', clock: info.clock });
      const allowed = Math.max(1, opts.missedPongs ?? 3);
      let unanswered = 0;
      heartbeat = setInterval(() => {
        if (unanswered >= allowed) return void ws.terminate(); // gone, or half-open: the close handler reports it
        unanswered++;
        ws.ping();
      }, opts.heartbeatMs ?? 15_000);
      heartbeat.unref?.();
      ws.on('pong', () => (unanswered = 0));
    });
    ws.on('close', () => {
      clearTimeout(helloDeadline);
      if (heartbeat) clearInterval(heartbeat);
      if (!attached) fail(undefined, 'the emulator closed the connection');
      resolveExit(stopping ? { code: 0, signal: null } : { code: null, signal: null, reason: `lost the connection to the attached emulator at ${target}` });
    });
  });
  ready.catch(() => undefined);
  return {
    ready,
    exited,
    stop: async () => {
      stopping = true;
      if (ws.readyState !== WebSocket.CLOSED) {
        ws.close();
        // A peer that does not answer the close handshake is cut off.
        const cut = setTimeout(() => ws.terminate(), 500);
        await exited;
        clearTimeout(cut);
      }
    },
  };
}
