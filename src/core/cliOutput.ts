// Reading what `quayside start --json` prints: one JSON line when it listens, or one error line
// before it exits non-zero. Everything else on stdout/stderr is log text.

export interface ListeningEvent {
  event: 'listening';
  url: string;
  http: string;
  token: string;
  pid: number;
  dataDir?: string | null;
  clock?: 'system' | 'virtual';
}

export interface ErrorEvent {
  event: 'error';
  code: string;
  message: string;
}

export type CliEvent = ListeningEvent | ErrorEvent;

/** The CLI event on this line, or undefined when the line is plain log text. */
export function parseCliLine(line: string): CliEvent | undefined {
  const t = line.trim();
  if (!t.startsWith('{') || !t.endsWith('}')) return undefined;
  let v: unknown;
  try {
    v = JSON.parse(t);
  } catch {
    return undefined;
  }
  if (!v || typeof v !== 'object') return undefined;
  const o = v as Record<string, unknown>;
  if (o.event === 'listening' && typeof o.url === 'string') {
    const ev: ListeningEvent = {
      event: 'listening',
      url: o.url,
      http: typeof o.http === 'string' ? o.http : o.url.replace(/^ws/, 'http'),
      token: typeof o.token === 'string' ? o.token : '',
      pid: typeof o.pid === 'number' ? o.pid : 0,
    };
    if (typeof o.dataDir === 'string' || o.dataDir === null) ev.dataDir = o.dataDir as string | null;
    if (o.clock === 'virtual' || o.clock === 'system') ev.clock = o.clock;
    return ev;
  }
  if (o.event === 'error') {
    return {
      event: 'error',
      code: typeof o.code === 'string' && o.code ? o.code : 'failed',
      message: typeof o.message === 'string' && o.message ? o.message : 'the emulator reported an error',
    };
  }
  return undefined;
}

/** Splits a stream's chunks into lines (a partial last line waits for the next chunk). */
export class LineSplitter {
  private rest = '';
  constructor(private readonly onLine: (line: string) => void) {}

  push(chunk: string | Buffer): void {
    this.rest += chunk.toString();
    let i: number;
    while ((i = this.rest.indexOf('\n')) >= 0) {
      const line = this.rest.slice(0, i).replace(/\r$/, '');
      this.rest = this.rest.slice(i + 1);
      this.onLine(line);
    }
  }

  end(): void {
    if (this.rest) this.onLine(this.rest);
    this.rest = '';
  }
}

/**
 * Why a process that printed no error line died before listening, read from its stderr: a native
 * module built for another Node, a missing file, or unknown.
 */
export function classifyStderr(stderr: string): { code: string; message: string } | undefined {
  if (/NODE_MODULE_VERSION|was compiled against a different Node\.js version|Could not locate the bindings file|invalid ELF header|better_sqlite3\.node|ERR_DLOPEN_FAILED/.test(stderr)) {
    const m = /compiled against a different Node\.js version using\s+NODE_MODULE_VERSION (\d+)\.[^]*?requires\s+NODE_MODULE_VERSION (\d+)/.exec(stderr);
    return {
      code: 'native_module',
      message: m
        ? `better-sqlite3 was built for a different Node (module version ${m[1]}, this Node needs ${m[2]})`
        : 'better-sqlite3 (the emulator\'s native SQLite module) does not load under this Node',
    };
  }
  const missing = /Cannot find module '([^']+)'/.exec(stderr);
  if (missing) return { code: 'emulator_broken', message: `the emulator cannot find the module ${missing[1]}` };
  if (/EADDRINUSE/.test(stderr)) return { code: 'port_in_use', message: 'the port is in use' };
  return undefined;
}

/** host and port of a ws:// or http:// URL. */
export function hostPort(url: string): { host: string; port: number } {
  try {
    const u = new URL(url);
    const port = u.port ? Number(u.port) : u.protocol === 'wss:' || u.protocol === 'https:' ? 443 : 80;
    return { host: u.hostname, port };
  } catch {
    return { host: '127.0.0.1', port: 0 };
  }
}
