// Shared helpers for the bench: timing, statistics, free ports, child processes that are always
// stopped, and loading peers from .bench-deps.
import { spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { createRequire } from 'node:module';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

export const ROOT = path.resolve(__dirname, '..');
export const DEPS = path.join(ROOT, '.bench-deps');
export const BUILD = process.env.BENCH_BUILD_DIR ? path.resolve(process.env.BENCH_BUILD_DIR) : path.join(__dirname, '.build');

/** `require` rooted in .bench-deps, so peers never come from (or leak into) the repo's node_modules. */
export const depRequire = createRequire(path.join(DEPS, 'node_modules', '.bench-require.js'));

export function hasDep(name: string): boolean {
  try {
    depRequire.resolve(`${name}/package.json`);
    return true;
  } catch {
    return false;
  }
}

export function depVersion(name: string): string | null {
  try {
    return (depRequire(`${name}/package.json`) as { version: string }).version;
  } catch {
    return null;
  }
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
export const now = () => performance.now();

// ------------------------------------------------------------------ bodies

/** The value after `--name` on the command line, if given. */
export function argVal(name: string): string | undefined {
  const i = process.argv.indexOf(name);
  return i > 1 ? process.argv[i + 1] : undefined;
}

/** A ~200-byte JSON body (its JSON text is 200 bytes give or take a digit). */
export function makeBody(i: number): Record<string, unknown> {
  const base = { id: i, kind: 'order.created', customer: `c-${(i * 7919) % 100000}`, total: (i % 1000) + 0.99, items: [{ sku: 'SKU-1', qty: 1 }], pad: '' };
  const len = JSON.stringify(base).length;
  base.pad = 'x'.repeat(Math.max(0, 200 - len));
  return base;
}

// ------------------------------------------------------------------ stats

export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i];
}

export function median(xs: number[]): number {
  const v = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (v.length === 0) return NaN;
  const m = v.length >> 1;
  return v.length % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

export interface Sample {
  /** Operations (messages) per second. */
  rate: number;
  /** Per-call latency, ms (only where each call was timed). */
  p50?: number;
  p99?: number;
  count: number;
  seconds: number;
}

/** Runs `total` calls of `op`, `inFlight` at a time (closed loop), timing each call when asked. */
export async function drive(total: number, inFlight: number, op: (i: number) => Promise<unknown>, timeCalls = false): Promise<Sample> {
  const lat: number[] = timeCalls ? new Array(total) : [];
  let next = 0;
  const t0 = now();
  const worker = async () => {
    for (;;) {
      const i = next++;
      if (i >= total) return;
      if (timeCalls) {
        const s = now();
        await op(i);
        lat[i] = now() - s;
      } else await op(i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(inFlight, total) }, worker));
  const seconds = (now() - t0) / 1000;
  const out: Sample = { rate: total / seconds, count: total, seconds };
  if (timeCalls) {
    lat.sort((a, b) => a - b);
    out.p50 = percentile(lat, 50);
    out.p99 = percentile(lat, 99);
  }
  return out;
}

/** Fills a queue with `n` bodies (numbered from `from`) in batches of 1,000, 4 batches in flight. */
export async function preloadInBatches(n: number, from: number, pushBatch: (bodies: unknown[]) => Promise<unknown>): Promise<void> {
  const per = 1000;
  const calls = Math.ceil(n / per);
  await drive(calls, 4, (c) => pushBatch(Array.from({ length: Math.min(per, n - c * per) }, (_, j) => makeBody(from + c * per + j))));
}

/**
 * Consumes `n` messages with `consumers` loops, each claiming up to 10 at a time and settling them
 * before it claims again (a peer's pull-and-ack loop). An empty answer is retried after 5 ms; 200
 * in a row means the queue ran dry, which fails the run.
 */
export async function consumeLoops<M>(
  peer: string,
  n: number,
  consumers: number,
  receive: (max: number) => Promise<M[]>,
  settle: (batch: M[]) => Promise<unknown>,
): Promise<Sample> {
  let claimed = 0;
  let done = 0;
  const t0 = now();
  const loop = async () => {
    let empty = 0;
    while (claimed < n) {
      const want = Math.min(10, n - claimed);
      claimed += want;
      const batch = await receive(want);
      claimed -= want - batch.length;
      if (batch.length === 0) {
        if (++empty > 200) throw new Error(`${peer}: queue ran dry after ${done} of ${n}`);
        await sleep(5);
        continue;
      }
      empty = 0;
      await settle(batch);
      done += batch.length;
    }
  };
  await Promise.all(Array.from({ length: consumers }, loop));
  const seconds = (now() - t0) / 1000;
  return { rate: done / seconds, count: done, seconds };
}

// ------------------------------------------------------------------ ports and processes

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.unref();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
  });
}

export async function waitForPort(port: number, timeoutMs: number, child?: ChildProcess): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (child && child.exitCode !== null) throw new Error(`process exited (${child.exitCode}) before listening on ${port}`);
    const ok = await new Promise<boolean>((resolve) => {
      const sock = net.connect(port, '127.0.0.1');
      sock.once('connect', () => {
        sock.destroy();
        resolve(true);
      });
      sock.once('error', () => resolve(false));
    });
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`nothing listened on 127.0.0.1:${port} within ${timeoutMs} ms`);
    await sleep(25);
  }
}

const children = new Set<ChildProcess>();
const tmpDirs = new Set<string>();

export interface Proc {
  child: ChildProcess;
  pid: number;
  /** Everything it printed, for error messages. */
  output(): string;
  /** Resolves with the first stdout line matching. */
  waitForLine(re: RegExp, timeoutMs: number): Promise<string>;
  stop(signal?: NodeJS.Signals, graceMs?: number): Promise<void>;
}

/** Starts a child that is killed (by its pid) when the bench exits, fails or is interrupted. */
export function startProc(cmd: string, args: string[], opts: SpawnOptions = {}): Proc {
  const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], ...opts });
  if (!child.pid) throw new Error(`could not start ${cmd}`);
  children.add(child);
  let out = '';
  let lineBuf = '';
  const lineWaiters: { re: RegExp; resolve: (l: string) => void }[] = [];
  child.stdout?.on('data', (d: Buffer) => {
    const s = d.toString();
    if (out.length < 200_000) out += s;
    lineBuf += s;
    let nl: number;
    while ((nl = lineBuf.indexOf('\n')) >= 0) {
      const line = lineBuf.slice(0, nl);
      lineBuf = lineBuf.slice(nl + 1);
      for (let i = lineWaiters.length - 1; i >= 0; i--) {
        if (lineWaiters[i].re.test(line)) {
          lineWaiters[i].resolve(line);
          lineWaiters.splice(i, 1);
        }
      }
    }
  });
  child.stderr?.on('data', (d: Buffer) => {
    if (out.length < 200_000) out += d.toString();
  });
  child.on('exit', () => children.delete(child));
  const pid = child.pid;
  return {
    child,
    pid,
    output: () => out,
    waitForLine(re, timeoutMs) {
      return new Promise((resolve, reject) => {
        const t = setTimeout(() => reject(new Error(`${cmd}: no line matching ${re} within ${timeoutMs} ms; output:\n${out.slice(-2000)}`)), timeoutMs);
        const onExit = () => reject(new Error(`${cmd} exited (${child.exitCode}) before printing ${re}; output:\n${out.slice(-2000)}`));
        child.once('exit', onExit);
        lineWaiters.push({
          re,
          resolve: (l) => {
            clearTimeout(t);
            child.off('exit', onExit);
            resolve(l);
          },
        });
      });
    },
    async stop(signal = 'SIGTERM', graceMs = 5000) {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise<void>((r) => child.once('exit', () => r()));
      child.kill(signal);
      const t = setTimeout(() => child.kill('SIGKILL'), graceMs);
      await exited;
      clearTimeout(t);
    },
  };
}

/** A temp dir removed when the bench ends; under `base` (default the OS temp dir) when given. */
export function makeTmpDir(prefix: string, base = os.tmpdir()): string {
  const d = fs.mkdtempSync(path.join(base, `quayside-bench-${prefix}-`));
  tmpDirs.add(d);
  return d;
}

export function removeTmpDir(d: string): void {
  try {
    // Retries: a server's last child processes may still be writing there as it goes.
    fs.rmSync(d, { recursive: true, force: true, maxRetries: 5, retryDelay: 50 });
    tmpDirs.delete(d);
  } catch {
    /* kept in the set: the last-resort cleanup tries again */
  }
}

/** Synchronous last-resort cleanup: SIGKILL every child we started (by pid) and drop temp dirs. */
export function killAllChildrenSync(): void {
  for (const c of children) {
    try {
      if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    } catch {
      /* gone */
    }
  }
  children.clear();
  for (const d of tmpDirs) {
    try {
      fs.rmSync(d, { recursive: true, force: true });
    } catch {
      /* best effort */
    }
  }
  tmpDirs.clear();
}

export function liveChildren(): number {
  return children.size;
}

/** RSS and peak RSS of a process, MB (Linux /proc). */
export function rssOf(pid: number): { rssMB: number; hwmMB: number } | null {
  try {
    const s = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
    const rss = /VmRSS:\s+(\d+) kB/.exec(s);
    const hwm = /VmHWM:\s+(\d+) kB/.exec(s);
    return { rssMB: Number(rss?.[1] ?? 0) / 1024, hwmMB: Number(hwm?.[1] ?? 0) / 1024 };
  } catch {
    return null;
  }
}

/** The process ids below `pid` (children, theirs, …). */
function descendants(pid: number): number[] {
  const out: number[] = [];
  const queue = [pid];
  for (let p = queue.shift(); p !== undefined && out.length < 1000; p = queue.shift()) {
    try {
      const kids = fs.readFileSync(`/proc/${p}/task/${p}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
      out.push(...kids);
      queue.push(...kids);
    } catch {
      /* gone */
    }
  }
  return out;
}

function pssMB(pid: number): number {
  try {
    // No Pss line (a process exiting as it is read): nothing to count.
    return Number(/^Pss:\s+(\d+) kB/m.exec(fs.readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'))?.[1] ?? 0) / 1024;
  } catch {
    return 0;
  }
}

/**
 * A server's memory. A single process: its RSS and peak (rssOf), even while it has a short-lived
 * child (Redis rewriting its AOF). A server that is a tree of processes (PostgreSQL, a process per
 * connection): the sum of the processes' PSS, which counts each shared page once across them
 * (their RSS summed would count the shared buffers once per process); no peak.
 */
export function serverMemory(pid: number, tree = false): { rssMB: number; hwmMB: number; note?: string } | null {
  const top = rssOf(pid);
  if (!top || !tree) return top;
  const kids = descendants(pid);
  const total = [pid, ...kids].reduce((a, p) => a + pssMB(p), 0);
  return { rssMB: total, hwmMB: NaN, note: `PSS summed over ${kids.length + 1} processes` };
}

export function dirSizeMB(d: string): number {
  let total = 0;
  const walk = (p: string) => {
    for (const e of fs.readdirSync(p, { withFileTypes: true })) {
      const f = path.join(p, e.name);
      if (e.isDirectory()) walk(f);
      else total += fs.statSync(f).size;
    }
  };
  try {
    walk(d);
  } catch {
    return NaN;
  }
  return total / 1024 / 1024;
}

export function log(msg: string): void {
  process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${msg}\n`);
}
