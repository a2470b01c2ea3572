// Shared pieces of the reliability suite (and of scripts/crash-test.ts and scripts/soak.ts):
// running the built emulator as a child process, a raw WebSocket client that can send anything,
// reading a child's RSS, and digests of a store's tables.

import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import WebSocket from 'ws';
import type Database from 'better-sqlite3';
import type { Store } from '../../emulator/store/store';

export const ROOT = path.resolve(__dirname, '..', '..');
export const CLI = path.join(ROOT, 'dist', 'emulator', 'cli.js');

function newestMtime(dir: string): number {
  let t = 0;
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) t = Math.max(t, newestMtime(p));
    else if (e.name.endsWith('.ts')) t = Math.max(t, fs.statSync(p).mtimeMs);
  }
  return t;
}

/**
 * `npm test` builds before mocha; a test run on its own (or the scripts) builds here when
 * dist/ is missing or older than emulator/.
 */
export function ensureBuilt(): void {
  const built = fs.existsSync(CLI) ? fs.statSync(CLI).mtimeMs : 0;
  if (built >= newestMtime(path.join(ROOT, 'emulator'))) return;
  execFileSync(process.execPath, [path.join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.build.json'], { cwd: ROOT, stdio: 'inherit' });
}

export function tempDir(prefix = 'quayside-rel-'): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}

export interface Child {
  proc: ChildProcess;
  pid: number;
  url: string;
  httpUrl: string;
  port: number;
  token: string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  stderr: () => string;
}

export interface StartFailure {
  event: 'error';
  code: string;
  message: string;
  exitCode: number | null;
  stderr: string;
}

/** Runs `node dist/emulator/cli.js start … --json`; resolves when it printed `listening` (or its error). */
export function startChild(opts: { dataDir?: string; memory?: boolean; port?: number; token?: string; args?: string[]; timeoutMs?: number; uid?: number; gid?: number }): Promise<Child | StartFailure> {
  const args = [CLI, 'start', '--json', '--port', String(opts.port ?? 0)];
  if (opts.memory) args.push('--memory');
  else if (opts.dataDir) args.push('--data', opts.dataDir);
  if (opts.token) args.push('--token', opts.token);
  args.push(...(opts.args ?? []));
  const proc = spawn(process.execPath, args, { cwd: os.tmpdir(), stdio: ['ignore', 'pipe', 'pipe'], uid: opts.uid, gid: opts.gid });
  let err = '';
  proc.stderr!.on('data', (d) => (err += d.toString()).length > 20000 && (err = err.slice(-20000)));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) => proc.once('exit', (code, signal) => r({ code, signal })));
  return new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => {
      proc.kill('SIGKILL');
      reject(new Error(`the emulator did not start within ${opts.timeoutMs ?? 15000} ms: ${out} ${err}`));
    }, opts.timeoutMs ?? 15000);
    proc.stdout!.on('data', (d) => {
      out += d.toString();
      const nl = out.indexOf('\n');
      if (nl < 0) return;
      const line = out.slice(0, nl);
      clearTimeout(timer);
      let ev: Record<string, unknown>;
      try {
        ev = JSON.parse(line);
      } catch {
        reject(new Error(`unexpected output from the emulator: ${line}`));
        return;
      }
      if (ev.event === 'listening') {
        const url = String(ev.url);
        resolve({ proc, pid: proc.pid!, url, httpUrl: String(ev.http), port: Number(new URL(url).port), token: String(ev.token), exited, stderr: () => err });
      } else {
        void exited.then(({ code }) => resolve({ event: 'error', code: String(ev.code), message: String(ev.message), exitCode: code, stderr: err }));
      }
    });
    exited.then(({ code, signal }) => {
      clearTimeout(timer);
      if (!out.includes('\n')) reject(new Error(`the emulator exited (code ${code}, signal ${signal}) before listening: ${err}`));
    });
  });
}

export function isFailure(c: Child | StartFailure): c is StartFailure {
  return (c as StartFailure).event === 'error';
}

export async function startOk(opts: Parameters<typeof startChild>[0]): Promise<Child> {
  const c = await startChild(opts);
  if (isFailure(c)) throw new Error(`the emulator refused to start: ${c.code}: ${c.message}`);
  return c;
}

export async function kill9(c: Child): Promise<void> {
  if (c.proc.exitCode !== null || c.proc.signalCode !== null) return;
  c.proc.kill('SIGKILL');
  await c.exited;
}

/** Resident set size of a process in KiB (Linux /proc). */
export function rssKb(pid: number): number {
  const m = /VmRSS:\s+(\d+)\s+kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) : NaN;
}

export interface Frame {
  id?: number | string | null;
  ok?: boolean;
  result?: any;
  error?: { code: string; message: string; [k: string]: unknown };
  event?: string;
  [k: string]: unknown;
}

/** A WebSocket client that sends whatever it is given and keeps every frame it gets. */
export class RawClient {
  readonly frames: Frame[] = [];
  private waiters: { pred: (f: Frame) => boolean; resolve: (f: Frame) => void; reject: (e: Error) => void; timer: NodeJS.Timeout }[] = [];
  private nextId = 1;
  closed: { code: number; reason: string } | null = null;

  private constructor(readonly ws: WebSocket) {
    ws.on('message', (data) => {
      let f: Frame;
      try {
        f = JSON.parse(data.toString());
      } catch {
        f = { id: null, ok: false, error: { code: '__not_json__', message: data.toString().slice(0, 200) } };
      }
      this.frames.push(f);
      for (const w of [...this.waiters]) {
        if (w.pred(f)) {
          clearTimeout(w.timer);
          this.waiters.splice(this.waiters.indexOf(w), 1);
          w.resolve(f);
        }
      }
    });
    ws.on('close', (code, reason) => {
      this.closed = { code, reason: reason.toString() };
      for (const w of this.waiters.splice(0)) {
        clearTimeout(w.timer);
        w.reject(new Error(`connection closed (${code})`));
      }
    });
    ws.on('error', () => {});
  }

  static open(url: string, headers: Record<string, string> = {}): Promise<RawClient> {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(url, { headers, perMessageDeflate: false, maxPayload: 512 * 1024 * 1024 });
      ws.once('open', () => resolve(new RawClient(ws)));
      ws.once('unexpected-response', (_req, res) => reject(Object.assign(new Error(`upgrade refused: ${res.statusCode}`), { status: res.statusCode })));
      ws.once('error', reject);
    });
  }

  /** Opens and says hello with `token`. */
  static async hello(url: string, token: string): Promise<RawClient> {
    const c = await RawClient.open(url);
    const r = await c.request('hello', { version: 1, token });
    if (!r.ok) throw new Error(`hello failed: ${JSON.stringify(r.error)}`);
    return c;
  }

  sendRaw(data: string | Buffer, binary = false): void {
    this.ws.send(data, { binary });
  }

  /** Sends a frame and resolves to its answer. */
  request(op: string, args?: unknown, timeoutMs = 10000): Promise<Frame> {
    const id = this.nextId++;
    const p = this.waitFor((f) => f.id === id && f.event === undefined, timeoutMs);
    this.ws.send(JSON.stringify({ id, op, args }));
    return p;
  }

  async ok(op: string, args?: unknown): Promise<any> {
    const r = await this.request(op, args);
    if (!r.ok) throw new Error(`${op} failed: ${JSON.stringify(r.error)}`);
    return r.result;
  }

  waitFor(pred: (f: Frame) => boolean, timeoutMs = 10000): Promise<Frame> {
    const seen = this.frames.find(pred);
    if (seen) {
      this.frames.splice(this.frames.indexOf(seen), 1);
      return Promise.resolve(seen);
    }
    return new Promise((resolve, reject) => {
      if (this.closed) return reject(new Error(`connection closed (${this.closed.code})`));
      const timer = setTimeout(() => {
        this.waiters.splice(this.waiters.findIndex((w) => w.timer === timer), 1);
        reject(new Error(`no matching frame within ${timeoutMs} ms`));
      }, timeoutMs);
      this.waiters.push({
        pred, timer, reject,
        resolve: (f) => {
          this.frames.splice(this.frames.indexOf(f), 1);
          resolve(f);
        },
      });
    });
  }

  close(): Promise<void> {
    if (this.closed) return Promise.resolve();
    return new Promise((r) => {
      this.ws.once('close', () => r());
      this.ws.terminate();
    });
  }
}

/** Everything a client could observe in a store, as one hash (the lag history is left out: reads may record it). */
export function storeDigest(db: Database.Database): string {
  const h = crypto.createHash('sha256');
  for (const t of ['queues', 'messages', 'dedupe', 'namespaces', 'audit', 'tokens', 'meta']) {
    h.update(t);
    for (const row of db.prepare(`SELECT * FROM ${t} ORDER BY 1, 2`).all()) h.update(JSON.stringify(row));
  }
  return h.digest('hex');
}

/** Hashes every file in a directory (names, sizes, contents). */
export function dirDigest(dir: string): string {
  const h = crypto.createHash('sha256');
  for (const name of fs.readdirSync(dir).sort()) {
    const p = path.join(dir, name);
    const st = fs.statSync(p);
    h.update(`${name}:${st.isDirectory() ? 'dir' : st.size}:${st.mode}`);
    if (st.isFile()) h.update(fs.readFileSync(p));
  }
  return h.digest('hex');
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** The SQLite database under an in-process emulator (these tests check the SQLite store itself). */
export function sqliteOf(emu: { engine: { store: unknown } }): Database.Database {
  return (emu.engine.store as Store).db;
}
