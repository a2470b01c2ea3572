#!/usr/bin/env node
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Connection as ConnectionT } from './clients/connection';
import type { Dialect, MessageView, QueueInfo } from './protocol';
import { DEFAULT_PORT, LIMITS, isDialect } from './protocol';
import { QuaysideError } from './errors';

// The `quayside` command: `start` runs an emulator; the others talk to a running one.

const USAGE = `quayside <command> [options]

  start        run the emulator        --port ${DEFAULT_PORT} (or QUAYSIDE_PORT) --host 127.0.0.1 --data .quayside | --memory
                                       --token T --clock virtual --durability normal|full --free-tier
                                       --config quayside.json --json --exit-with-parent
  queues       list queues             [--ns NAMESPACE]
  create Q     create a queue          --ns NAMESPACE [--dialect cache|env|sync] (cache if not given)
  delete Q     delete a queue          --ns NAMESPACE --yes
  push Q BODY  push a JSON body        --ns NAMESPACE [--delay MS] [--dedupe KEY] [--attributes JSON] [--dialect D]
                                       (BODY "-" reads stdin; attributes are kept and shown, and env consumers get them;
                                       a missing queue is made as --dialect says, else as a cache queue, except in a
                                       namespace with a "/")
  peek Q       look without leasing    --ns NAMESPACE [--state ready,delayed,leased,dead|failed] [--limit N] [--cursor NEXT]
                                       [--search TEXT] (a case-sensitive part of the body, as the panel's filter)
  show Q ID    one message in full     --ns NAMESPACE
  export Q     every message, as JSON  --ns NAMESPACE [--state ready,delayed,leased,dead|failed] [--search TEXT]
                                       [--format json|ndjson] [--out FILE]
  stats Q      counts and 24 h of lag  --ns NAMESPACE
  dead Q       list dead letters       --ns NAMESPACE [--limit N] [--cursor NEXT]
                                       (an env queue's failed area; NEXT: what a page prints when more follow)
  replay Q     dead letters → queue    --ns NAMESPACE [--ids a,b] [--max N]
  purge-dead Q delete dead letters     --ns NAMESPACE [--ids a,b] [--yes]
                                       (all of them without --ids: asked first in a terminal, unless --yes)
  purge Q      delete live messages    --ns NAMESPACE --yes
  audit        replays and purges      [--ns NAMESPACE] [--limit N]
  advance MS   move a virtual clock

Client commands take --url and --token (or QUAYSIDE_URL / QUAYSIDE_TOKEN) and --json.
--ns is also --namespace; a command that needs one reads QUAYSIDE_NAMESPACE without it.
quayside --help prints this, quayside --version the version (--json: {"version":…}).`;

interface Args {
  _: string[];
  flags: Record<string, string | true>;
  /** Options given more than once: a usage error, so `--ns prod --ns dev` never acts on either quietly. */
  repeated?: string[];
}

const BOOLEAN = new Set(['json', 'memory', 'yes', 'exit-with-parent', 'free-tier', 'help', 'version']);

/** The version in the package.json above this file (dist/emulator/ when built, emulator/ from source). */
function packageVersion(): string {
  for (let dir = __dirname; ; dir = path.dirname(dir)) {
    try {
      const pkg = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8')) as { name?: string; version?: string };
      if (pkg.name === 'quayside' && pkg.version) return pkg.version;
    } catch {
      // no package.json here: look further up
    }
    if (path.dirname(dir) === dir) return 'unknown';
  }
}

export function parseArgs(argv: string[]): Args {
  // No prototype: --__proto__ or --constructor is an option like any other (and so unknown).
  const out: Args = { _: [], flags: Object.create(null) as Args['flags'] };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--') {
      out._.push(...argv.slice(i + 1));
      break;
    }
    if (a.startsWith('--')) {
      const eq = a.indexOf('=');
      const key = eq > 0 ? a.slice(2, eq) : a.slice(2);
      if (Object.hasOwn(out.flags, key)) (out.repeated ??= []).push(key);
      if (eq > 0) out.flags[key] = a.slice(eq + 1);
      else if (BOOLEAN.has(key) || i + 1 >= argv.length || argv[i + 1].startsWith('--')) out.flags[key] = true;
      else out.flags[key] = argv[++i];
    } else if (a === '-h') out.flags.help = true;
    else out._.push(a);
  }
  return out;
}

class UsageError extends Error {
  /** Whether the whole usage text helps (no command, or one that does not exist); else one line points to it. */
  constructor(message: string, readonly withUsage = false) {
    super(message);
  }
}

/** The options each command takes; any other is a usage error, so a misspelt --delay never pushes at once. */
const CLIENT_FLAGS = ['url', 'token', 'json', 'help'];
const NS_FLAGS = ['ns', 'namespace'];
const COMMAND_FLAGS: Record<string, string[]> = {
  start: ['port', 'host', 'data', 'memory', 'token', 'clock', 'durability', 'free-tier', 'config', 'json', 'exit-with-parent', 'help'],
  queues: [...CLIENT_FLAGS, ...NS_FLAGS],
  create: [...CLIENT_FLAGS, ...NS_FLAGS, 'dialect'],
  delete: [...CLIENT_FLAGS, ...NS_FLAGS, 'yes'],
  push: [...CLIENT_FLAGS, ...NS_FLAGS, 'delay', 'dedupe', 'attributes', 'dialect'],
  stats: [...CLIENT_FLAGS, ...NS_FLAGS],
  show: [...CLIENT_FLAGS, ...NS_FLAGS],
  peek: [...CLIENT_FLAGS, ...NS_FLAGS, 'state', 'limit', 'cursor', 'search'],
  export: [...CLIENT_FLAGS, ...NS_FLAGS, 'state', 'search', 'format', 'out'],
  dead: [...CLIENT_FLAGS, ...NS_FLAGS, 'limit', 'cursor'],
  replay: [...CLIENT_FLAGS, ...NS_FLAGS, 'ids', 'max'],
  'purge-dead': [...CLIENT_FLAGS, ...NS_FLAGS, 'ids', 'yes'],
  purge: [...CLIENT_FLAGS, ...NS_FLAGS, 'yes'],
  audit: [...CLIENT_FLAGS, ...NS_FLAGS, 'limit'],
  advance: CLIENT_FLAGS,
};

/** The arguments each command takes, in order; one more is a usage error (`push q 1 2` must not push 1). */
const COMMAND_ARGS: Record<string, string[]> = {
  start: [], queues: [], create: ['Q'], delete: ['Q'], push: ['Q', 'BODY'], stats: ['Q'], show: ['Q', 'ID'], peek: ['Q'], export: ['Q'],
  dead: ['Q'], replay: ['Q'], 'purge-dead': ['Q'], purge: ['Q'], audit: [], advance: ['MS'],
};

function checkFlags(cmd: string, args: Args): void {
  const known = COMMAND_FLAGS[cmd];
  if (!known) throw new UsageError(`unknown command "${cmd}"`, true);
  const takes = COMMAND_ARGS[cmd];
  const extra = args._.slice(1 + takes.length);
  if (extra.length > 0) {
    throw new UsageError(`${cmd} takes ${takes.length ? takes.join(' ') : 'no arguments'}; "${extra[0].slice(0, 60)}" is one too many (quote a BODY with spaces)`);
  }
  for (const k of Object.keys(args.flags)) {
    if (!known.includes(k)) throw new UsageError(`unknown option --${k} for ${cmd}; it takes ${known.map((f) => `--${f}`).join(' ')}`);
    // --memory=false must not be read as --memory, nor quietly as its absence.
    if (BOOLEAN.has(k) && args.flags[k] !== true) throw new UsageError(`--${k} takes no value; give --${k} alone, got --${k}=${String(args.flags[k]).slice(0, 60)}`);
  }
  if (args.repeated?.length) throw new UsageError(`--${args.repeated[0]} is given more than once; give it once`);
  if (args.flags.ns !== undefined && args.flags.namespace !== undefined) throw new UsageError('--ns and --namespace are the same option; give one');
}

/** --dialect, one of the three. */
function dialectFlag(args: Args): Dialect | undefined {
  const d = flag(args, 'dialect');
  if (d !== undefined && !isDialect(d)) throw new UsageError(`--dialect must be cache, env or sync, got "${d}"`);
  return d;
}

/** An env queue lives in project/environment: one made elsewhere no env client could reach. */
function checkNamespaceFor(dialect: Dialect | undefined, namespace: string): void {
  if (dialect !== 'env') return;
  const { envNamespace } = require('./http/env-naming') as typeof import('./http/env-naming');
  const slash = namespace.indexOf('/');
  if (slash <= 0 || slash === namespace.length - 1) throw new UsageError(`an env queue's namespace is <project>/<environment> (such as shop/dev), got "${namespace}"`);
  try {
    envNamespace(namespace.slice(0, slash), namespace.slice(slash + 1)); // the API's own rules for each part
  } catch (e) {
    throw new UsageError(`--ns for an env queue: ${(e as Error).message}`);
  }
}

function flag(args: Args, name: string, alias?: string): string | undefined {
  const v = args.flags[name] ?? (alias ? args.flags[alias] : undefined);
  if (v === true) throw new UsageError(`--${name} needs a value`);
  return v;
}

/** A path or host: empty (--data "", an unset variable in a script) is no value, never "the current directory" or "none". */
function nonEmptyFlag(args: Args, name: string): string | undefined {
  const v = flag(args, name);
  if (v === '') throw new UsageError(`--${name} needs a value`);
  return v;
}

/**
 * `--ids m_1,m_2`: the messages to act on. Given but empty (`--ids=`) is a usage error, not "all":
 * without ids, replay takes the oldest 100 dead letters (or --max) and purge-dead deletes them all.
 */
function idsFlag(args: Args): string[] | undefined {
  const v = flag(args, 'ids');
  if (v === undefined) return undefined;
  const ids = v.split(',').map((x) => x.trim());
  if (ids.every((x) => x.length === 0)) throw new UsageError('--ids needs at least one message id (m_1,m_2); leave it out to act on the oldest (replay) or all (purge-dead)');
  if (ids.some((x) => x.length === 0)) throw new UsageError(`--ids has an empty id in "${v.slice(0, 60)}"; give message ids separated by single commas (m_1,m_2)`);
  return ids;
}

/** JSON text given on the command line, or a usage error naming what it was for. */
function jsonArg(text: string, what: string): unknown {
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new UsageError(`${what} is not JSON: ${(e as Error).message}`);
  }
}

/** `--attributes '{"k":"v"}'`: a JSON object, as the extension's push form takes. */
function attributesFlag(args: Args): Record<string, unknown> | undefined {
  const v = flag(args, 'attributes');
  if (v === undefined) return undefined;
  const o = jsonArg(v, '--attributes');
  if (typeof o !== 'object' || o === null || Array.isArray(o)) throw new UsageError('--attributes must be a JSON object, such as {"source":"cli"}');
  return o as Record<string, unknown>;
}

function intFlag(args: Args, name: string, min = 0, max = Number.MAX_SAFE_INTEGER): number | undefined {
  const v = flag(args, name);
  if (v === undefined) return undefined;
  // Decimal digits only: Number() would also take 0x10, 1e3 or " 5", and a typo should not pass as one.
  const n = /^-?\d+$/.test(v) ? Number(v) : NaN;
  if (!Number.isSafeInteger(n) || n < min) throw new UsageError(`--${name} must be a whole number ≥ ${min}, got "${v}"`);
  if (n > max) throw new UsageError(`--${name} must be at most ${max}, got ${n}`);
  return n;
}

/** QUAYSIDE_PORT, read as strictly as --port: plain digits (a blank, 0x0 or 1e0 is no port, not a random one). */
function envPort(): number | undefined {
  const v = process.env.QUAYSIDE_PORT;
  if (v === undefined || v === '') return undefined;
  if (!/^\d{1,5}$/.test(v)) throw new UsageError(`QUAYSIDE_PORT must be a whole number from 0 to 65535, got "${v.slice(0, 60)}"`);
  return Number(v);
}

const STATES: readonly MessageView['state'][] = ['ready', 'delayed', 'leased', 'dead'];

/** A page's footer when more follow: a table that stops at its limit must not pass for the whole list. */
function morePages(page: { messages: unknown[]; next: string | null }): string {
  return page.next ? `\n… more follow: the next page with --cursor ${page.next} (pages of up to ${LIMITS.maxPageSize} with --limit)` : '';
}

/** `--state ready,leased`: states by name, checked here so that a typo is a usage error. */
function statesFlag(args: Args): MessageView['state'][] | undefined {
  const v = flag(args, 'state');
  if (v === undefined) return undefined;
  // `failed`: the env dialect's name for its dead messages (its failed area).
  const states = v.split(',').map((x) => (x.trim() === 'failed' ? 'dead' : x.trim()));
  const bad = states.find((x) => !(STATES as readonly string[]).includes(x));
  if (v.trim() === '') throw new UsageError('--state names no state; give ready, delayed, leased or dead (failed, as env calls it; comma-separated), or leave it out for the live ones');
  if (bad === '') throw new UsageError(`--state has an empty state in "${v.slice(0, 60)}"; give states separated by single commas (ready,leased)`);
  if (bad !== undefined) throw new UsageError(`--state: unknown state "${bad}"; states are ${STATES.join(', ')} (failed: dead, as env calls it)`);
  return states as MessageView['state'][];
}

// ------------------------------------------------------------------ paths

/** A leading `~` as the shell would have expanded it (`--data=~/q` is not), and as the extension does. */
function homePath(p: string): string {
  if (p !== '~' && !p.startsWith('~/')) return p;
  return path.join(os.homedir(), p.slice(1));
}

/** The working directory was deleted under us: path.resolve of a relative path then fails. */
function cwdGone(e: unknown): boolean {
  const err = e as NodeJS.ErrnoException;
  return err?.syscall === 'uv_cwd' || (err?.code === 'ENOENT' && /uv_cwd/.test(String(err.message)));
}

/** A data directory as the banner shows it: relative to here when it can be, `.` for here itself. */
function shownDir(dir: string): string {
  try {
    return (path.relative(process.cwd(), dir) || '.') + '/';
  } catch {
    return dir + '/'; // (no working directory any more)
  }
}

/**
 * `text` into `file`, whole or not at all: written aside and renamed into place, so a full disk
 * leaves the old file as it was (never one cut short) and the error can say nothing was written.
 */
function writeWhole(file: string, text: string): void {
  const target = fs.existsSync(file) ? fs.realpathSync(file) : file;
  if (fs.existsSync(target)) {
    if (fs.statSync(target).isDirectory()) throw Object.assign(new Error(`${file} is a directory`), { code: 'EISDIR' });
    fs.accessSync(target, fs.constants.W_OK); // a read-only file is refused, not replaced
  }
  const aside = `${target}.${process.pid}.tmp`;
  try {
    fs.writeFileSync(aside, text);
    fs.renameSync(aside, target);
  } catch (e) {
    try {
      fs.rmSync(aside, { force: true });
    } catch {
      // (a name too long to remove was too long to write): the write's own error is the one to tell
    }
    throw e;
  }
}

// ------------------------------------------------------------------ start

const NATIVE_FAILURE = /better_sqlite3\.node|NODE_MODULE_VERSION|invalid ELF|was compiled against|Could not locate the bindings file/i;

/** Node majors by the ABI version (NODE_MODULE_VERSION) a native module is built for. */
const NODE_BY_ABI: Record<string, string> = { '93': '16', '108': '18', '115': '20', '120': '21', '127': '22', '131': '23', '137': '24' };

/**
 * What to tell a user whose better-sqlite3 does not load: which Node it was built for and which
 * Node this is (Node's own message spreads them over several lines), and the two fixes.
 */
export function nativeHelp(msg: string): string {
  const abi = /NODE_MODULE_VERSION (\d+)[^]*?NODE_MODULE_VERSION (\d+)/.exec(msg);
  const file = /(\S*better_sqlite3\.node)/.exec(msg)?.[1]?.replace(/^'|'$/g, '');
  const builtFor = abi ? NODE_BY_ABI[abi[1]] : undefined;
  const why = abi
    ? `its native module${file ? ` ${file}` : ''} was built for ${builtFor ? `Node ${builtFor}` : 'another Node'} (NODE_MODULE_VERSION ${abi[1]}); this Node needs NODE_MODULE_VERSION ${abi[2]}`
    : msg.replace(/\s+/g, ' ').trim().slice(0, 300);
  return `better-sqlite3 does not load under Node ${process.version}: ${why}. Fix: run \`npm i -D quayside\` in your workspace with this Node first on PATH (it builds for it), or point quayside.nodePath at ${builtFor ? `a Node ${builtFor}` : 'the Node it was built for'}.`;
}

async function start(args: Args): Promise<void> {
  const asJson = args.flags.json === true;
  const say = (event: Record<string, unknown>, text: string) => process.stdout.write(asJson ? JSON.stringify(event) + '\n' : text + '\n');
  const fail = (code: string, message: string): never => {
    if (asJson) process.stdout.write(JSON.stringify({ event: 'error', code, message }) + '\n');
    else process.stderr.write(`quayside: ${message}\n`);
    process.exit(code === 'usage' ? 64 : 1);
  };
  // Every option is read and checked before anything starts: a usage error leaves nothing running.
  let port: number, host: string, memory: boolean, dataDir: string | undefined, token: string | undefined, configFlag: string | undefined;
  let clockFlag: string, durability: string;
  try {
    checkFlags('start', args);
    if (args._.length > 1) throw new UsageError(`start takes no arguments, got "${args._.slice(1).join(' ')}"`);
    port = intFlag(args, 'port') ?? envPort() ?? DEFAULT_PORT;
    if (port > 65535) throw new UsageError(`the port must be a whole number from 0 to 65535, got "${flag(args, 'port') ?? process.env.QUAYSIDE_PORT}"`);
    host = nonEmptyFlag(args, 'host') ?? '127.0.0.1';
    memory = args.flags.memory === true;
    if (memory && args.flags.data !== undefined) throw new UsageError('--memory and --data exclude each other');
    dataDir = memory ? undefined : path.resolve(homePath(nonEmptyFlag(args, 'data') ?? '.quayside'));
    token = flag(args, 'token') ?? (process.env.QUAYSIDE_TOKEN || undefined); // set but empty is unset
    const config = nonEmptyFlag(args, 'config');
    configFlag = config === undefined ? undefined : homePath(config);
    clockFlag = flag(args, 'clock') ?? 'system';
    if (clockFlag !== 'system' && clockFlag !== 'virtual') throw new UsageError(`--clock must be system or virtual, got "${clockFlag}"`);
    durability = flag(args, 'durability') ?? 'normal';
    if (durability !== 'normal' && durability !== 'full') throw new UsageError(`--durability must be normal or full, got "${durability}"`);
  } catch (e) {
    // Every usage error of start, --clock with no value too, in start's own form (a JSON event on stdout with --json).
    if (e instanceof UsageError) return fail('usage', e.message);
    if (cwdGone(e)) return fail('data_dir', 'the current directory no longer exists (it was deleted or moved); cd to one that does, or give --data an absolute path');
    throw e;
  }

  let mod: typeof import('./emulator');
  try {
    mod = require('./emulator') as typeof import('./emulator');
  } catch (e) {
    const msg = (e as Error).message;
    if (NATIVE_FAILURE.test(msg)) fail('native_module', nativeHelp(msg));
    throw e;
  }
  // The config file is read and checked before the data directory is opened or a port taken.
  // lstat, not exists: a quayside.json that is a dangling or looping symlink is a broken config, not none.
  const configFile = configFlag ?? (fs.lstatSync('quayside.json', { throwIfNoEntry: false }) ? 'quayside.json' : undefined);
  const wc = require('./workspace-config') as typeof import('./workspace-config');
  let config: unknown;
  if (configFile) {
    try {
      config = wc.readWorkspaceConfig(path.resolve(configFile), configFile);
      wc.planWorkspaceConfig(config, configFile); // checked here for this command's own error code; startEmulator plans it again
    } catch (e) {
      return fail('config', (e as Error).message); // it names the file
    }
  }
  const start = (tok: string | undefined) =>
    mod.startEmulator({
      port, host, dataDir, memory,
      clock: clockFlag as 'system' | 'virtual',
      token: tok,
      durability: durability as 'normal' | 'full',
      freeTier: args.flags['free-tier'] === true,
      config: config as Record<string, unknown> | undefined,
      // Only warnings: the rest of the log (connections) would drown the banner a user reads.
      log: (line) => {
        if (line.startsWith('warning: ')) process.stderr.write(`quayside: ${line}\n`);
      },
    });
  // The token is the one option startEmulator checks that these flags have not: a refused one came
  // from --token (a usage error) or from QUAYSIDE_TOKEN.
  const tokenRefused = (e: unknown) => (e instanceof mod.QuaysideError && e.code === 'invalid_argument' ? /^startEmulator: token\b:? ?/.exec(e.message) : null);
  let emu: Awaited<ReturnType<typeof mod.startEmulator>>;
  try {
    try {
      emu = await start(token);
    } catch (e) {
      const m = tokenRefused(e);
      if (!m) throw e;
      const why = (e as Error).message.slice(m[0].length).replace(/^(must|is)\b/, 'token $1');
      if (flag(args, 'token') !== undefined) return fail('usage', `--token: ${why}`);
      // QUAYSIDE_TOKEN is there to restart with the token printed last time; a shell may hold an
      // app's narrower token in it instead, and that one cannot become the emulator's own.
      process.stderr.write(`quayside: QUAYSIDE_TOKEN is not used as the emulator's token: ${why}\n`);
      emu = await start(undefined);
    }
  } catch (e) {
    const err = e as NodeJS.ErrnoException & { problem?: string };
    // The file was checked above: what is left is a declared queue that exists with another dialect.
    if (configFile && e instanceof mod.QuaysideError && e.code === 'conflict') return fail('config', `${configFile}: ${err.message}`);
    if (NATIVE_FAILURE.test(err.message)) return fail('native_module', nativeHelp(err.message));
    if (err.code === 'EADDRINUSE') return fail('port_in_use', `port ${port} on ${host} is in use; choose another with --port (0 picks a free one)`);
    if (err.code === 'EACCES' || err.code === 'EADDRNOTAVAIL') return fail('listen', `cannot listen on ${host}:${port}: ${err.message}`);
    if (err.code === 'ENOTFOUND' || err.code === 'EAI_AGAIN') return fail('listen', `cannot listen on ${host}: it is not an address or a host name this machine can resolve (try --host 127.0.0.1)`);
    if (err.name === 'StoreOpenError') return fail('data_dir', err.message);
    if (err.code === 'SQLITE_READONLY' || err.code === 'SQLITE_CANTOPEN' || err.code === 'SQLITE_FULL' || err.code === 'SQLITE_IOERR') {
      return fail('data_dir', `the data directory ${dataDir} cannot be used: ${err.message}`);
    }
    return fail('start', err.message);
  }
  // Signals are handled before the banner: whoever reads it may stop us at once.
  let stopping = false;
  const stop = async (why: string) => {
    if (stopping) return;
    stopping = true;
    // After a SIGHUP the terminal is gone: writing to it could fail before the data is closed.
    if (!asJson && why !== 'SIGHUP') process.stderr.write(`quayside: ${why}, stopping\n`);
    const force = setTimeout(() => process.exit(0), 3000);
    force.unref();
    await emu.close().catch(() => {});
    process.exit(0);
  };
  process.on('SIGINT', () => void stop('SIGINT'));
  process.on('SIGTERM', () => void stop('SIGTERM'));
  // The terminal that ran `npm start` closed: a clean stop too, not a kill that leaves the lock and WAL.
  process.on('SIGHUP', () => void stop('SIGHUP'));
  say(
    { event: 'listening', url: emu.url, http: emu.httpUrl, token: emu.token, pid: process.pid, dataDir: dataDir ?? null, clock: clockFlag },
    `Quayside emulator listening on ${emu.url} (HTTP ${emu.httpUrl}), data ${dataDir ? 'in ' + printable(shownDir(dataDir)) : 'in memory'}${clockFlag === 'virtual' ? ', virtual clock' : ''}\n` +
      `  export QUAYSIDE_URL=${emu.url}\n  export QUAYSIDE_TOKEN=${emu.token}\nCtrl-C stops it.`,
  );
  if (args.flags['exit-with-parent'] === true) {
    // The parent holds our stdin open; when it dies the pipe closes and we go too.
    process.stdin.on('end', () => void stop('parent exited'));
    process.stdin.on('close', () => void stop('parent exited'));
    process.stdin.resume();
  }
}

// ------------------------------------------------------------------ client commands

/**
 * App-supplied text (a nack's error with its stack, a reason, a token's name) as one line a terminal
 * shows as it is: control characters as escapes, so a newline cannot break a row and an escape
 * sequence cannot clear the screen.
 */
function printable(v: unknown): string {
  return String(v).replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g, (c) => {
    if (c === '\n') return '\\n';
    if (c === '\r') return '\\r';
    if (c === '\t') return '\\t';
    const code = c.charCodeAt(0);
    return code < 0x100 ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16)}`;
  });
}

/** A namespace or queue name in a table: quoted when a blank at either end (or no text) would hide what it is. */
function shownName(name: string): string {
  return name === '' || name.trim() !== name ? JSON.stringify(name) : name;
}

/**
 * A body as indented JSON for a terminal. JSON escapes C0 controls but leaves C1 controls (U+009B
 * starts an escape sequence on some terminals), line separators and bidi overrides as they are:
 * those are written as JSON escapes, so the text is still the body's JSON.
 */
function printableJson(v: unknown): string {
  return JSON.stringify(v, null, 2).replace(/[\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/** East Asian wide and fullwidth characters, and emoji: two columns each in a terminal. */
const WIDE = /[\u1100-\u115f\u2e80-\u303e\u3041-\u33ff\u3400-\u4dbf\u4e00-\u9fff\ua000-\ua4cf\uac00-\ud7a3\uf900-\ufaff\ufe30-\ufe4f\uff00-\uff60\uffe0-\uffe6\u{1f300}-\u{1f64f}\u{1f900}-\u{1f9ff}\u{20000}-\u{3fffd}]/u;

/** Columns a cell takes in a terminal (code points, wide ones twice), so CJK names line up. */
function columns(text: string): number {
  let n = 0;
  for (const ch of text) n += WIDE.test(ch) ? 2 : 1;
  return n;
}

function table(rows: (string | number)[][], head: string[]): string {
  const all = [head, ...rows.map((r) => r.map(printable))].map((r) => r.map(String));
  const widths = head.map((_, i) => Math.max(...all.map((r) => columns(r[i]))));
  return all.map((r) => r.map((c, i) => c + ' '.repeat(widths[i] - columns(c))).join('  ').trimEnd()).join('\n');
}

const when = (t: number | null) => (t === null ? '' : new Date(t).toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z'));
const short = (v: unknown, n = 60) => {
  const s = JSON.stringify(v);
  return s.length > n ? s.slice(0, n - 1) + '…' : s;
};

function need(args: Args, i: number, what: string): string {
  const v = args._[i];
  if (v === undefined) throw new UsageError(`missing ${what}`);
  return v;
}

function ns(args: Args): string {
  const v = flag(args, 'ns', 'namespace') ?? process.env.QUAYSIDE_NAMESPACE;
  if (!v) throw new UsageError('--ns NAMESPACE is required (or QUAYSIDE_NAMESPACE)');
  return v;
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of process.stdin) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

async function client(cmd: string, args: Args): Promise<void> {
  checkFlags(cmd, args);
  const { Connection } = require('./clients/connection') as typeof import('./clients/connection');
  const { resolveUrl } = require('./clients/transport') as typeof import('./clients/transport');
  try {
    resolveUrl(flag(args, 'url'));
  } catch (e) {
    throw new UsageError(`${(e as Error).message} (from ${flag(args, 'url') !== undefined ? '--url' : 'QUAYSIDE_URL'})`);
  }
  const conn: ConnectionT = new Connection({ url: flag(args, 'url'), token: flag(args, 'token'), client: 'quayside-cli', connectTimeoutMs: 2000 });
  const asJson = args.flags.json === true;
  const out = (data: unknown, text: string) => process.stdout.write((asJson ? JSON.stringify(data, null, 2) : text) + '\n');
  try {
    switch (cmd) {
      case 'queues': {
        // Given but empty (an unset variable in a script) is a usage error, not "every namespace".
        const namespace = flag(args, 'ns', 'namespace');
        if (namespace === '') throw new UsageError('--ns needs a value; leave it out to list the queues of every namespace');
        const { queues } = await conn.request('queue.list', namespace !== undefined ? { namespace } : {});
        // DEAD / FAILED: an env queue's dead messages are its failed area.
        out(queues, queues.length === 0 ? 'no queues' : table(queues.map((q: QueueInfo) => [shownName(q.namespace), shownName(q.name), q.dialect, q.counts.ready, q.counts.delayed, q.counts.leased, q.counts.dead]), ['NAMESPACE', 'QUEUE', 'DIALECT', 'READY', 'DELAYED', 'IN FLIGHT', 'DEAD / FAILED']));
        break;
      }
      case 'create': {
        const dialect = dialectFlag(args) ?? 'cache';
        const namespace = ns(args);
        checkNamespaceFor(dialect, namespace);
        const q = await conn.request('queue.create', { namespace, queue: need(args, 1, 'queue name'), dialect });
        out(q, `created ${q.dialect} queue ${q.name} in ${q.namespace} (id ${q.id})`);
        break;
      }
      case 'delete': {
        const queue = need(args, 1, 'queue name');
        if (args.flags.yes !== true) throw new UsageError(`deleting ${queue} drops all its messages; add --yes to confirm`);
        out(await conn.request('queue.delete', { namespace: ns(args), queue }), `deleted ${queue}`);
        break;
      }
      case 'push': {
        const queue = need(args, 1, 'queue name');
        const text = need(args, 2, 'BODY (JSON, or - for stdin)');
        // A file saved by a Windows editor starts with a byte order mark, which is not JSON's.
        const raw = text === '-' ? (await readStdin()).replace(/^\uFEFF/, '') : text;
        const body = jsonArg(raw, 'BODY');
        const namespace = ns(args);
        // A missing queue is made as --dialect says (a sync tenant's queue before its worker first
        // ran), else as cache.queue().push makes one, except in a project/environment: there a
        // cache queue would take the slug an env queue needs (env queues are created).
        const dialect = dialectFlag(args);
        checkNamespaceFor(dialect, namespace);
        const create = dialect ?? (namespace.includes('/') ? undefined : 'cache');
        let r;
        try {
          // With --dialect, only a queue of that dialect takes the push (one of another is not_found to the engine).
          r = await conn.request('push', { namespace, queue, body, delayMs: intFlag(args, 'delay'), dedupeKey: flag(args, 'dedupe'), attributes: attributesFlag(args), create, ...(dialect ? { dialect } : {}) });
        } catch (e) {
          if (!(e instanceof QuaysideError) || e.code !== 'not_found') throw e;
          if (dialect) {
            const other = await conn.request('queue.get', { namespace, queue }).catch(() => null);
            if (other) throw new QuaysideError('conflict', `queue "${queue}" in namespace "${namespace}" is ${other.dialect === 'env' ? 'an' : 'a'} ${other.dialect} queue, not ${dialect}; nothing was pushed`);
          }
          if (create) throw e;
          throw new QuaysideError('not_found', `${e.message}; in a namespace with a "/" a queue is created first: quayside create ${queue} --ns ${namespace} --dialect env (or cache), or push with --dialect env`, { details: e.details });
        }
        out(r, r.deduped ? `deduped: ${r.id} already holds that key` : `pushed ${r.id}`);
        break;
      }
      case 'peek': {
        const r = await conn.request('peek', { namespace: ns(args), queue: need(args, 1, 'queue name'), states: statesFlag(args), limit: intFlag(args, 'limit', 1, LIMITS.maxPageSize) ?? 20, cursor: flag(args, 'cursor'), search: nonEmptyFlag(args, 'search') });
        // An env queue's dead messages are its failed area, and the table says so (the JSON keeps the protocol's state).
        const failed = !asJson && r.messages.some((m: MessageView) => m.state === 'dead') && (await deadWords(conn, args, false)).startsWith('failed');
        const state = (m: MessageView) => (failed && m.state === 'dead' ? 'failed' : m.state);
        out(r, `${r.total} message(s)\n` + table(r.messages.map((m: MessageView) => [m.id, state(m), m.attempts, when(m.enqueuedAt), short(m.body)]), ['ID', 'STATE', 'ATTEMPTS', 'ENQUEUED', 'BODY']) + morePages(r));
        break;
      }
      case 'export': {
        // Every message in the states asked for (all four by default), a page at a time, never leasing:
        // the panel's Export as a command. To a file with --out, else to stdout.
        const queue = need(args, 1, 'queue name');
        const format = flag(args, 'format') ?? 'json';
        if (format !== 'json' && format !== 'ndjson') throw new UsageError(`--format must be json or ndjson, got "${format}"`);
        const file = flag(args, 'out');
        if (file !== undefined && file.trim() === '') throw new UsageError('--out needs a file name');
        const states = statesFlag(args) ?? [...STATES];
        const search = nonEmptyFlag(args, 'search');
        const all: MessageView[] = [];
        for (let cursor: string | undefined; ; ) {
          const page = await conn.request('peek', { namespace: ns(args), queue, states, search, limit: LIMITS.maxPageSize, cursor });
          all.push(...page.messages);
          if (!page.next || page.messages.length === 0) break;
          cursor = page.next;
        }
        const text = format === 'ndjson' ? all.map((m) => JSON.stringify(m) + '\n').join('') : JSON.stringify(all, null, 2) + '\n';
        if (file === undefined) process.stdout.write(text);
        else {
          let target = file;
          try {
            target = path.resolve(homePath(file)); // (inside: a working directory deleted meanwhile fails here)
            writeWhole(target, text);
          } catch (e) {
            const err = e as NodeJS.ErrnoException;
            const why = err.code === 'EISDIR' ? 'it is a directory' : err.code === 'ENOENT' ? 'its directory does not exist' : err.code === 'EACCES' || err.code === 'EPERM' ? 'permission denied' : err.code === 'ENOSPC' ? 'the disk is full' : err.message;
            // The CLI's own code (the file is not the emulator's business), as data_dir and config are.
            throw Object.assign(new Error(`cannot write --out ${file}: ${why}${err.code ? ` (${err.code})` : ''}; nothing was exported`), { code: 'out_file' });
          }
          out({ exported: all.length, file: target }, `exported ${all.length} message(s) to ${target}`);
        }
        break;
      }
      case 'show': {
        const m = await conn.request('message.get', { namespace: ns(args), queue: need(args, 1, 'queue name'), id: need(args, 2, 'message id (m_…)') });
        // An env queue's dead message is in its failed area, and says so (the JSON keeps the protocol's words).
        const failed = !asJson && m.state === 'dead' && (await deadWords(conn, args, false)).startsWith('failed');
        const rows: [string, unknown][] = [
          ['id', m.id], ['state', failed ? 'failed' : m.state], ['attempts', m.attempts], ['enqueued', when(m.enqueuedAt)], ['visible', when(m.visibleAt)],
          ['lease until', when(m.leaseUntil)], ['dedupe key', m.dedupeKey], ['content type', m.contentType], ['attributes', m.attributes && JSON.stringify(m.attributes)],
          [failed ? 'failed' : 'dead', m.deadAt === null ? null : `${when(m.deadAt)} (${m.deadReason})`], ['last error', m.lastError], ['size', `${m.sizeBytes} bytes`],
        ];
        out(m, rows.filter(([, v]) => v !== null && v !== '').map(([k, v]) => `${k.padEnd(13)}${printable(v)}`).join('\n') + `\nbody\n${printableJson(m.body)}`);
        break;
      }
      case 'stats': {
        const r = await conn.request('stats', { namespace: ns(args), queue: need(args, 1, 'queue name') });
        const c = r.counts;
        const steps = r.lagHistory.filter((st) => st.peakDepth > 0 || st.maxWaitMs > 0);
        const deadWord = asJson || !(await deadWords(conn, args, false)).startsWith('failed') ? 'dead' : 'failed';
        out(r, `ready ${c.ready}, delayed ${c.delayed}, in flight ${c.leased}, ${deadWord} ${c.dead}, oldest ready ${Math.round(c.oldestReadyAgeMs / 1000)} s\n` +
          (steps.length === 0 ? 'no backlog in the last 24 h' : table(steps.map((st) => [when(st.start), st.peakDepth, Math.round(st.maxWaitMs / 1000)]), ['HALF HOUR FROM', 'PEAK DEPTH', 'LONGEST WAIT (S)'])));
        break;
      }
      case 'dead': {
        const r = await conn.request('dead.list', { namespace: ns(args), queue: need(args, 1, 'queue name'), limit: intFlag(args, 'limit', 1, LIMITS.maxPageSize) ?? 100, cursor: flag(args, 'cursor') });
        // `reason` as the cache product's deadLetters() calls it, beside the protocol's deadReason.
        const words = await deadWords(conn, args, asJson);
        out({ ...r, messages: r.messages.map((m: MessageView) => ({ ...m, reason: m.deadReason })) }, `${r.total} ${words}\n` + table(r.messages.map((m: MessageView) => [m.id, m.attempts, m.deadReason ?? '', when(m.deadAt), short(m.body, 40), m.lastError ?? '']), ['ID', 'ATTEMPTS', 'REASON', words.startsWith('failed') ? 'FAILED AT' : 'DEAD AT', 'BODY', 'LAST ERROR']) + morePages(r));
        break;
      }
      case 'replay': {
        const ids = idsFlag(args);
        if (ids && flag(args, 'max') !== undefined) throw new UsageError('--max counts the oldest dead letters to replay; with --ids the ids say which, so give one or the other');
        const queue = need(args, 1, 'queue name');
        const max = intFlag(args, 'max', 1, LIMITS.maxReplay);
        const r = await conn.request('dead.replay', { namespace: ns(args), queue, ids, max });
        // Without --ids it takes the oldest 100 (or --max), as cache replay() does: say if more wait
        // (in the JSON too, as `left`).
        let rest = '';
        let left: number | undefined;
        if (!ids) {
          // Only a note: the replay is done, so a failure here (the queue deleted meanwhile) says nothing.
          try {
            left = (await conn.request('dead.list', { namespace: ns(args), queue, limit: 1 })).total;
            if (left > 0 && !asJson) rest = `; ${left} ${(await deadWords(conn, args, false)).replace('(s)', left === 1 ? '' : 's')} left (--max N takes more at once)`;
          } catch {
            rest = '';
          }
        }
        out(left === undefined ? r : { ...r, left }, `replayed ${r.replayed}${rest}`);
        break;
      }
      case 'purge-dead': {
        const queue = need(args, 1, 'queue name');
        const ids = idsFlag(args);
        // All of them, typed by a person: asked first (on stderr, so --json output stays clean). A
        // script (no terminal) is not asked, as the seed's `tilldev cache purge-dead` is not; --yes
        // says so in either.
        if (!ids && args.flags.yes !== true && process.stdin.isTTY && process.stderr.isTTY) {
          const q = await conn.request('queue.get', { namespace: ns(args), queue });
          const what = q.dialect === 'env' ? 'failed message' : 'dead letter';
          const n = q.counts.dead;
          if (n === 0) {
            out({ purged: 0 }, `no ${what}s to purge`);
            break;
          }
          if (!(await ask(`Delete ${n === 1 ? `the 1 ${what}` : `all ${n} ${what}s`} of ${queue} in ${ns(args)}, for good? [y/N] `))) {
            out({ purged: 0 }, 'nothing purged');
            break;
          }
        }
        const r = await conn.request('dead.purge', { namespace: ns(args), queue, ids });
        out(r, `purged ${r.purged} ${await deadWords(conn, args, asJson)}`);
        break;
      }
      case 'purge': {
        const queue = need(args, 1, 'queue name');
        if (args.flags.yes !== true) throw new UsageError(`purging ${queue} deletes its ready, delayed and leased messages; add --yes to confirm`);
        const r = await conn.request('purge', { namespace: ns(args), queue, confirm: queue });
        out(r, `purged ${r.purged} message(s)`);
        break;
      }
      case 'audit': {
        const namespace = flag(args, 'ns', 'namespace');
        const r = await conn.request('audit.list', { namespace, limit: intFlag(args, 'limit', 1, LIMITS.maxAuditEntries) ?? 50 });
        out(r, table(r.entries.map((e) => [when(e.at), e.token, e.tokenId ?? '-', shownName(e.namespace), shownName(e.queue), e.action, e.count]), ['AT', 'TOKEN', 'TOKEN ID', 'NAMESPACE', 'QUEUE', 'ACTION', 'COUNT']));
        break;
      }
      case 'advance': {
        const text = need(args, 1, 'milliseconds');
        // Whole milliseconds in plain digits, as every number the CLI takes (1.5 would move 2 ms).
        const ms = /^\d{1,16}$/.test(text) ? Number(text) : NaN;
        if (!Number.isFinite(ms)) throw new UsageError(`MS must be a whole number of milliseconds ≥ 0 (digits, such as 30000), got "${text.slice(0, 60)}"`);
        const r = await conn.request('clock.advance', { ms });
        out(r, `clock now ${when(r.now)}`);
        break;
      }
      default:
        throw new UsageError(`unknown command "${cmd}"`);
    }
  } catch (e) {
    throw inCliTerms(e, cmd);
  } finally {
    await conn.close();
  }
}

/** A yes/no question on the terminal (on stderr); anything but y or yes is no, and so are Ctrl-C and Ctrl-D. */
async function ask(question: string): Promise<boolean> {
  const readline = require('node:readline/promises') as typeof import('node:readline/promises');
  const rl = readline.createInterface({ input: process.stdin, output: process.stderr });
  // Ctrl-D ends the input and Ctrl-C closes it: the question then has no answer, which is no.
  const closed = new Promise<string>((resolve) => rl.once('close', () => resolve('')));
  rl.once('SIGINT', () => rl.close());
  const answer = rl.question(question).catch(() => ''); // a closed interface rejects it
  try {
    return /^y(es)?$/i.test((await Promise.race([answer, closed])).trim());
  } finally {
    rl.close();
  }
}

/** What a queue's dead letters are called in its product: an env queue's are its failed area. */
async function deadWords(conn: ConnectionT, args: Args, asJson: boolean): Promise<string> {
  if (asJson) return ''; // not shown: no need to ask
  const q = await conn.request('queue.get', { namespace: ns(args), queue: need(args, 1, 'queue name') });
  return q.dialect === 'env' ? 'failed message(s)' : 'dead letter(s)';
}

/** The protocol field behind each flag the emulator checks itself (a --delay past the queue's limit). */
const FLAG_OF_FIELD: Record<string, string> = { delayMs: '--delay', dedupeKey: '--dedupe', attributes: '--attributes' };

/**
 * An emulator refusal in the words of the command line: the flag the user typed, not the protocol
 * field it became; the command, not the operation it called. Code and details are kept.
 */
function inCliTerms(e: unknown, cmd: string): unknown {
  if (!(e instanceof QuaysideError)) return e;
  let message: string | undefined;
  if (e.code === 'forbidden' && e.details?.readOnly === true) message = `this token is read-only; quayside ${cmd} needs a read-write token`;
  const field = /^(\w+) /.exec(e.message)?.[1];
  if (e.code === 'invalid_argument' && field && FLAG_OF_FIELD[field]) message = FLAG_OF_FIELD[field] + e.message.slice(field.length);
  return message === undefined ? e : new QuaysideError(e.code, message, { resetAt: e.resetAt, details: e.details });
}

export async function main(argv: string[]): Promise<void> {
  const args = parseArgs(argv);
  const cmd = args._[0];
  // `quayside bogus --help` is a typo, not a request for help: it fails as `quayside bogus` does.
  if ((args.flags.help === true && (cmd === undefined || Object.hasOwn(COMMAND_FLAGS, cmd))) || cmd === 'help' || argv.length === 0) {
    process.stdout.write(USAGE + '\n');
    return;
  }
  const flagNames = Object.keys(args.flags);
  if (!cmd && args.flags.version === true && flagNames.every((f) => f === 'version' || (f === 'json' && args.flags.json === true))) {
    process.stdout.write(args.flags.json === true ? JSON.stringify({ version: packageVersion() }) + '\n' : `quayside ${packageVersion()}\n`);
    return;
  }
  try {
    // Options with no command (`quayside --bogus`) are a usage error, not a quiet usage text.
    const first = Object.keys(args.flags)[0];
    if (!cmd && (first === 'help' || first === 'version') && args.flags[first] !== true) throw new UsageError(`--${first} takes no value; give --${first} alone`);
    if (!cmd) throw new UsageError(`no command given; an option (--${first}) goes after one: quayside <command> [options]`, true);
    if (cmd === 'start') await start(args);
    else await client(cmd, args);
  } catch (e) {
    const err = e as Error & { code?: string };
    const usage = e instanceof UsageError;
    // The emulator refusing an argument (a --delay past the queue's limit) is a usage error too.
    process.exitCode = usage || err.code === 'invalid_argument' ? 64 : err.code === 'unavailable' ? 69 : 1;
    if (args.flags.json === true) {
      // A script asked for JSON: the error is JSON too (on stderr, so stdout stays the result).
      // resetAt (quota_exceeded) and details ride along, as in the protocol's error.
      const { resetAt, details } = err as { resetAt?: number; details?: Record<string, unknown> };
      process.stderr.write(JSON.stringify({ error: { code: usage ? 'usage' : err.code ?? 'internal', message: err.message, ...(resetAt !== undefined ? { resetAt } : {}), ...(details ? { details } : {}) } }) + '\n');
    } else if (usage) {
      // A typo in an option needs its one line, not thirty lines of usage after it.
      process.stderr.write(`quayside: ${err.message}\n` + (e.withUsage ? `\n${USAGE}\n` : 'quayside --help lists every command and option\n'));
    } else {
      process.stderr.write(`quayside: ${err.code ? err.code + ': ' : ''}${err.message}\n`);
    }
  }
}

/**
 * The reader of our output went away (`quayside export q | head -1`): a quiet end, as for any Unix
 * filter, never a stack trace. A running emulator (`start`) goes on serving without its output.
 */
function quietWhenReaderGoes(serving: boolean): void {
  for (const stream of [process.stdout, process.stderr]) {
    stream.on('error', (e: NodeJS.ErrnoException) => {
      if (e.code !== 'EPIPE' && e.code !== 'ERR_STREAM_DESTROYED') throw e;
      if (!serving) process.exit(process.exitCode ?? 0);
    });
  }
}

if (require.main === module) {
  const argv = process.argv.slice(2);
  quietWhenReaderGoes(parseArgs(argv)._[0] === 'start'); // `quayside --json start` serves too
  void main(argv);
}
