import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { APPLICATION_ID, MIGRATIONS, SCHEMA_VERSION } from './schema';
import { DEAD, LEASED, StoreOpenError, WAITING, countWithin, type StoreOpenProblem, type AuditRow, type DueRow, type LagRow, type MessageRow, type NamespaceRow, type NewMessage, type QueueRow, type QueueStore, type TokenRow } from './boundary';

// The only module with SQL. Each exported method is one atomic transition of the queue state
// machine: the engine calls them inside its group-commit transaction and never writes SQL.

export { WAITING, LEASED, DEAD } from './boundary';
export type { QueueRow, MessageRow, LagRow, NewMessage, DueRow, TokenRow, NamespaceRow, AuditRow, QueueStore } from './boundary';

const INSERT_MESSAGES = 'INSERT INTO messages (id, seq, queue_id, state, visible_at, attempts, enqueued_at, expires_at, body, size, extra) VALUES';
const INSERT_ROW = '(?, ?, ?, 0, ?, 0, ?, ?, ?, ?, ?)';
const INSERT_PARAMS = 9;
/** Rows per multi-row INSERT (far under SQLite's 32,766 parameters). */
const INSERT_CHUNK = 25;

/** One row's parameters for INSERT_ROW, written into `args` from `at`. */
function bindInsert(args: unknown[], at: number, id: number, queueId: number, now: number, m: NewMessage): void {
  args[at] = id;
  args[at + 1] = id; // seq: a new message waits in id order
  args[at + 2] = queueId;
  args[at + 3] = m.visibleAt;
  args[at + 4] = now;
  args[at + 5] = m.expiresAt;
  args[at + 6] = m.body;
  args[at + 7] = m.size;
  args[at + 8] = m.extra;
}

/** The columns a claim reads back (the rest of the row it knows already). */
type ClaimedRow = Pick<MessageRow, 'id' | 'visible_at' | 'attempts' | 'enqueued_at' | 'expires_at' | 'body' | 'size' | 'extra' | 'last_error'>;

// Here for the store's importers; declared in boundary.ts so the public types never reach better-sqlite3.
export { StoreOpenError, type StoreOpenProblem };

export interface StoreOptions {
  /** A directory holding `quayside.db`, or null for an in-memory database. */
  dataDir: string | null;
  durability?: 'normal' | 'full';
}

export const DB_FILE = 'quayside.db';
/** Next to the database while a store has it open: the owner's pid. */
export const LOCK_FILE = 'quayside.lock';

/** Does a process with this pid exist (EPERM: it does, under another user)? */
function processAlive(pid: number): boolean {
  if (!Number.isSafeInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
  return !isZombie(pid);
}

/**
 * A process killed with -9 whose parent has not reaped it (a container whose pid 1 reaps nobody)
 * still answers kill(pid, 0), but it holds nothing any more: its lock is taken over. Linux only.
 */
function isZombie(pid: number): boolean {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) === 'Z';
  } catch {
    return false; // no /proc (macOS, Windows), or gone meanwhile
  }
}

/** The pid a lock file names; NaN when it is gone or holds no number. */
function readOwner(file: string): number {
  try {
    return Number.parseInt(fs.readFileSync(file, 'utf8'), 10);
  } catch {
    return NaN;
  }
}

function lockError(dataDir: string, e: unknown): StoreOpenError {
  const why = (e as NodeJS.ErrnoException).code === 'ENAMETOOLONG' ? 'its path is too long; choose a shorter one' : 'is the disk full or read-only?';
  return new StoreOpenError('unwritable', `cannot lock the data directory ${dataDir} (${(e as Error).message}); ${why}`);
}

/** A held data-directory lock: its file, and the directory's device:inode (see Store.lockedDirs). */
interface DirLock {
  file: string;
  key: string;
}

/** Message ids reserved per meta write (see allocateMessageId). */
const MESSAGE_ID_BLOCK = 1000;

/** The SQLite implementation of the store boundary (boundary.ts). */
export class Store implements QueueStore {
  readonly db: Database.Database;
  readonly file: string | null;
  private s: ReturnType<Store['prepare']>;

  /** The data directory's lock while this store holds it (see lockDataDir). */
  private lock: DirLock | null = null;

  /** This open created the database file (and the directories from `createdDir` down), which `discard()` removes. */
  private readonly fresh: boolean = false;
  private readonly createdDir: string | null = null;

  constructor(opts: StoreOptions) {
    // Resolved once, and that path used for everything: `build/../.qs` made one directory and
    // opened another when only the mkdir resolved it.
    const dataDir = opts.dataDir ? path.resolve(opts.dataDir) : null;
    this.file = dataDir ? path.join(dataDir, DB_FILE) : null;
    if (dataDir) {
      // SQLite opens no database whose -journal's path passes 512 bytes (measured here: a data
      // directory of 492 bytes opens, one of 493 does not): said before anything is made.
      const most = 512 - `/${DB_FILE}-journal`.length;
      if (Buffer.byteLength(dataDir) > most) {
        throw new StoreOpenError('unwritable', `the data directory ${dataDir} is too long a path for SQLite (${Buffer.byteLength(dataDir)} bytes; it takes at most ${most}); choose a shorter one`);
      }
      this.createdDir = Store.prepareDir(dataDir);
      try {
        this.lock = Store.lockDataDir(dataDir);
      } catch (e) {
        Store.removeCreated(dataDir, this.createdDir);
        throw e;
      }
    }
    const fresh = this.file !== null && !fs.existsSync(this.file);
    this.fresh = fresh;
    try {
      this.db = Store.openDatabase(dataDir, this.file);
    } catch (e) {
      this.unlock();
      if (dataDir) Store.removeCreated(dataDir, this.createdDir);
      throw e;
    }
    try {
      this.db.pragma('journal_mode = WAL');
      this.db.pragma(`synchronous = ${opts.durability === 'full' ? 'FULL' : 'NORMAL'}`);
      this.db.pragma('foreign_keys = OFF');
      // 16 MiB of page cache: a queue's hot pages are its head and tail, so more only adds RSS.
      this.db.pragma('cache_size = -16000');
      // Checkpoints run when the engine is idle (checkpointIdle); SQLite's own, in the middle of a
      // commit, only as a backstop for a long busy spell. This keeps them out of request latency.
      this.db.pragma('wal_autocheckpoint = 5000');
      this.db.pragma('temp_store = MEMORY');
      this.migrate();
      this.s = this.prepare();
      this.loadQueues();
    } catch (e) {
      this.db.close();
      this.unlock();
      const code = String((e as { code?: unknown }).code ?? '');
      if (!/^SQLITE_(FULL|IOERR|READONLY|CANTOPEN)/.test(code)) throw e;
      // A file we had just created is removed again, so a failed start leaves the directory as it was.
      if (fresh && this.file) for (const f of [this.file, `${this.file}-wal`, `${this.file}-shm`]) fs.rmSync(f, { force: true });
      if (dataDir) Store.removeCreated(dataDir, this.createdDir);
      throw new StoreOpenError('unwritable', `cannot write ${this.file} (${(e as Error).message}, ${code}); is the disk full or read-only?`);
    }
  }

  /** Creates the data directory and any missing parents; returns the outermost it created (null: it existed). */
  private static prepareDir(dataDir: string): string | null {
    const made: string[] = [];
    try {
      // One level at a time from the deepest that exists, not mkdirSync's recursive form, which
      // loops for ever where the file system answers ENOENT to every mkdir (a path under /proc).
      const missing: string[] = [];
      for (let d = dataDir; !fs.existsSync(d) && path.dirname(d) !== d; d = path.dirname(d)) {
        // Not there, yet something is: a symlink to nothing (or a loop), which mkdir would call "exists".
        if (fs.lstatSync(d, { throwIfNoEntry: false })?.isSymbolicLink()) throw new Error(`${d} is a symbolic link to nothing (its target is missing, or it loops)`);
        missing.unshift(d);
      }
      for (const d of missing) {
        fs.mkdirSync(d);
        made.push(d);
      }
      if (!fs.statSync(dataDir).isDirectory()) throw new Error(`${dataDir} is not a directory`);
      fs.accessSync(dataDir, fs.constants.W_OK);
      return missing[0] ?? null;
    } catch (e) {
      // What it made before the failure (a name too long three levels down, a full disk) goes again.
      if (made.length) Store.removeCreated(made[made.length - 1], made[0]);
      throw new StoreOpenError('unwritable', `the data directory ${dataDir} cannot be written: ${(e as Error).message}`);
    }
  }

  /**
   * Removes the directories a refused start created, from `dir` up to `createdDir`, each only if
   * empty (what is in one now is not ours to remove). Never throws: it must not hide why the start failed.
   */
  private static removeCreated(dir: string, createdDir: string | null): void {
    if (!createdDir) return;
    for (let d = path.resolve(dir); ; d = path.dirname(d)) {
      try {
        fs.rmdirSync(d);
      } catch {
        return;
      }
      if (d === createdDir || path.dirname(d) === d) return;
    }
  }

  /**
   * Data directories this process holds, by device and inode: one directory reached by two paths
   * (a symlink, a bind mount, another letter case) is one key, so a second store in this process
   * is refused too. A lock file naming this pid that is not here is a leftover of an earlier
   * process that had the same pid (a restarted container), and is taken over.
   */
  private static readonly lockedDirs = new Set<string>();

  /**
   * One store per data directory: two would each hold counts the other does not see (and the
   * table's counts_dirty flag would lie). The lock file holds the owner's pid; a lock whose process
   * is gone (a kill -9) is taken over.
   */
  private static lockDataDir(dataDir: string): DirLock {
    const st = fs.statSync(dataDir);
    const key = `${st.dev}:${st.ino}`;
    const file = path.join(fs.realpathSync(dataDir), LOCK_FILE);
    if (Store.lockedDirs.has(key)) {
      throw new StoreOpenError('in_use', `the data directory ${dataDir} is in use by another store in this process; close it or choose another data directory`);
    }
    // The lock appears with its pid already in it (written aside, then linked into place, which
    // fails if one exists): a lock created empty and written after could be read as garbage by
    // another start in between, and taken over.
    const mine = `${file}.${process.pid}.new`;
    const dropMine = () => {
      try {
        fs.rmSync(mine, { force: true });
      } catch {
        // (a path too long to remove was too long to make): it must not hide the lock's own error
      }
    };
    try {
      fs.writeFileSync(mine, `${process.pid}\n`);
    } catch (e) {
      dropMine();
      throw lockError(dataDir, e);
    }
    try {
      for (let attempt = 0; ; attempt++) {
        try {
          fs.linkSync(mine, file);
          Store.lockedDirs.add(key);
          return { file, key };
        } catch (e) {
          if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw lockError(dataDir, e);
        }
        if (!fs.lstatSync(file, { throwIfNoEntry: false })?.isFile() && fs.existsSync(file)) {
          throw new StoreOpenError('not_quayside', `${file} is not a Quayside lock (not a file); move it away or choose another data directory`);
        }
        const owner = readOwner(file);
        if ((owner !== process.pid && processAlive(owner)) || attempt >= 4) {
          throw new StoreOpenError('in_use', `the data directory ${dataDir} is in use by another Quayside emulator (pid ${owner}); stop it or choose another data directory (if no emulator runs there, delete ${file})`);
        }
        Store.takeOver(file, owner); // left by a process that is gone
      }
    } finally {
      dropMine();
    }
  }

  /**
   * Removes a lock left by `owner`, a process that is gone, unless another start took it over
   * first. Two starts can both find the same stale lock: deleting it by name would let the later
   * one delete the lock the earlier one had just made, and both would run. So it is moved aside
   * (a rename moves one file, atomically) and read again: a lock that is no longer `owner`'s is
   * another start's, and is put back (link fails rather than replace one made since).
   */
  private static takeOver(file: string, owner: number): void {
    const aside = `${file}.${process.pid}.stale`;
    try {
      fs.renameSync(file, aside);
    } catch {
      return; // gone already: the caller tries again
    }
    const moved = readOwner(aside);
    if (moved !== owner && !(Number.isNaN(moved) && Number.isNaN(owner))) {
      try {
        fs.linkSync(aside, file);
      } catch {
        // Another lock appeared meanwhile: that one stands, and the caller is refused by it.
      }
    }
    fs.rmSync(aside, { force: true });
  }

  private unlock(): void {
    if (!this.lock) return;
    Store.lockedDirs.delete(this.lock.key);
    fs.rmSync(this.lock.file, { force: true });
    this.lock = null;
  }

  private static openDatabase(dataDir: string | null, file: string | null): Database.Database {
    if (!dataDir || !file) return new Database(':memory:');
    if (fs.existsSync(file) && !fs.statSync(file).isFile()) {
      throw new StoreOpenError('not_quayside', `${file} is not a Quayside database (not a file); move it away or choose another data directory`);
    }
    const existed = fs.existsSync(file) && fs.statSync(file).size > 0;
    // SQLite creates these as it opens; a refused start removes the ones it made, leaving the directory as it was.
    const sidecars = [`${file}-wal`, `${file}-shm`].filter((f) => !fs.existsSync(f));
    try {
      return Store.openChecked(file, existed);
    } catch (e) {
      for (const f of sidecars) fs.rmSync(f, { force: true });
      throw e;
    }
  }

  private static openChecked(file: string, existed: boolean): Database.Database {
    if (existed) {
      let fd: number;
      try {
        // Opened for writing, not access()ed: open checks the effective user, as SQLite's own open
        // will, and SQLite would otherwise fall back to read-only without a word.
        fd = fs.openSync(file, 'r+');
      } catch (e) {
        throw new StoreOpenError('unwritable', `${file} cannot be read and written (${(e as NodeJS.ErrnoException).code ?? (e as Error).message}); check its permissions (chmod u+rw) or choose another data directory`);
      }
      // Read the header ourselves before SQLite touches the file, so a foreign file is left as it was.
      const header = Buffer.alloc(100);
      try {
        fs.readSync(fd, header, 0, 100, 0);
      } finally {
        fs.closeSync(fd);
      }
      if (header.toString('latin1', 0, 16) !== 'SQLite format 3\u0000') {
        throw new StoreOpenError('not_quayside', `${file} is not a Quayside database (not an SQLite file); move it away or choose another data directory`);
      }
      // The marker may still sit in the WAL (a kill -9 before any checkpoint), so ask SQLite, read-only.
      Store.checkExisting(file);
    }
    let db: Database.Database;
    try {
      db = new Database(file);
    } catch (e) {
      throw new StoreOpenError('corrupt', `cannot open ${file}: ${(e as Error).message}`);
    }
    return db;
  }

  private static checkExisting(file: string): void {
    let ro: Database.Database;
    try {
      ro = new Database(file, { readonly: true, fileMustExist: true });
    } catch (e) {
      throw new StoreOpenError('corrupt', `cannot open ${file}: ${(e as Error).message}`);
    }
    try {
      const appId = ro.pragma('application_id', { simple: true }) as number;
      if (appId !== APPLICATION_ID) {
        const tables = (ro.prepare("SELECT count(*) AS n FROM sqlite_master").get() as { n: number }).n;
        if (appId !== 0 || tables > 0) {
          throw new StoreOpenError('not_quayside', `${file} is an SQLite database of another program, not Quayside's; move it away or choose another data directory`);
        }
      }
      const rows = ro.pragma('quick_check') as { quick_check: string }[];
      const verdict = rows.map((r) => r.quick_check).join('; ');
      if (verdict !== 'ok') throw new StoreOpenError('corrupt', `${file} is damaged (${verdict}); restore it from a copy or move it away`);
    } catch (e) {
      if (e instanceof StoreOpenError) throw e;
      throw new StoreOpenError('corrupt', `${file} is damaged (${(e as Error).message}); restore it from a copy or move it away`);
    } finally {
      ro.close();
    }
  }

  private migrate(): void {
    const version = this.db.pragma('user_version', { simple: true }) as number;
    if (version > SCHEMA_VERSION) {
      throw new StoreOpenError('newer_version', `the database was written by a newer Quayside (schema ${version}, this one knows ${SCHEMA_VERSION}); upgrade Quayside`);
    }
    if (version === SCHEMA_VERSION) return;
    this.db.transaction(() => {
      for (let v = version; v < SCHEMA_VERSION; v++) this.db.exec(MIGRATIONS[v]);
      this.db.pragma(`application_id = ${APPLICATION_ID}`);
      this.db.pragma(`user_version = ${SCHEMA_VERSION}`);
    })();
  }

  private prepare() {
    const d = this.db;
    return {
      metaGet: d.prepare<[string], { value: string }>('SELECT value FROM meta WHERE key = ?'),
      metaSet: d.prepare('INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value'),

      // Hot look-ups leave the policy text out: the engine parses it once and caches it.
      queueByName: d.prepare<[string, string], QueueRow>('SELECT id, pub_id, ns, name, dialect, created_at, n_waiting, n_leased, n_dead, live_bytes FROM queues WHERE ns = ? AND name = ?'),
      queueByPubId: d.prepare<[string], QueueRow>('SELECT id, pub_id, ns, name, dialect, created_at, n_waiting, n_leased, n_dead, live_bytes FROM queues WHERE pub_id = ?'),
      queueById: d.prepare<[number], QueueRow>('SELECT id, pub_id, ns, name, dialect, created_at, n_waiting, n_leased, n_dead, live_bytes FROM queues WHERE id = ?'),
      queuesAll: d.prepare<[], QueueRow>('SELECT id, pub_id, ns, name, dialect, created_at, n_waiting, n_leased, n_dead, live_bytes FROM queues ORDER BY ns, name'),
      queuesInNs: d.prepare<[string], QueueRow>('SELECT id, pub_id, ns, name, dialect, created_at, n_waiting, n_leased, n_dead, live_bytes FROM queues WHERE ns = ? ORDER BY name'),
      queueSettings: d.prepare<[number], { policy: string; consumer: string | null }>('SELECT policy, consumer FROM queues WHERE id = ?'),
      anyQuota: d.prepare<[], { n: number }>('SELECT EXISTS (SELECT 1 FROM namespaces WHERE daily_quota IS NOT NULL) AS n'),
      queueInsert: d.prepare('INSERT INTO queues (pub_id, ns, name, dialect, policy, consumer, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)'),
      queuePolicy: d.prepare('UPDATE queues SET policy = ? WHERE id = ?'),
      // A queue's age limits changed: its messages' expiries move with them (see reExpire).
      shiftExpiry: d.prepare('UPDATE messages SET expires_at = expires_at + ? WHERE queue_id = ? AND state = ? AND expires_at IS NOT NULL'),
      liveExpiryFrom: d.prepare('UPDATE messages SET expires_at = enqueued_at + ? WHERE queue_id = ? AND state IN (0, 1)'),
      liveExpiryOff: d.prepare('UPDATE messages SET expires_at = NULL WHERE queue_id = ? AND state IN (0, 1)'),
      queueConsumer: d.prepare('UPDATE queues SET consumer = ? WHERE id = ?'),
      queueDelete: d.prepare('DELETE FROM queues WHERE id = ?'),
      queueCounts: d.prepare('UPDATE queues SET n_waiting = ?, n_leased = ?, n_dead = ?, live_bytes = ? WHERE id = ?'),
      queueMessagesDelete: d.prepare('DELETE FROM messages WHERE queue_id = ?'),
      queueDedupeDelete: d.prepare('DELETE FROM dedupe WHERE queue_id = ?'),
      queueLagDelete: d.prepare('DELETE FROM lag WHERE queue_id = ?'),

      dedupeGet: d.prepare<[number, string], { message_id: number; expires_at: number }>('SELECT message_id, expires_at FROM dedupe WHERE queue_id = ? AND key = ?'),
      dedupePut: d.prepare('INSERT INTO dedupe (queue_id, key, message_id, expires_at) VALUES (?, ?, ?, ?) ON CONFLICT (queue_id, key) DO UPDATE SET message_id = excluded.message_id, expires_at = excluded.expires_at'),
      dedupeSweep: d.prepare('DELETE FROM dedupe WHERE (queue_id, key) IN (SELECT queue_id, key FROM dedupe WHERE expires_at <= ? ORDER BY expires_at LIMIT ?)'),

      insert: d.prepare(`${INSERT_MESSAGES} ${INSERT_ROW}`),
      // A batch's rows go INSERT_CHUNK to a statement: 4.2 µs a row against 6.5 one by one.
      insertChunk: d.prepare(`${INSERT_MESSAGES} ${Array(INSERT_CHUNK).fill(INSERT_ROW).join(', ')}`),
      maxMessageId: d.prepare<[], { n: number | null }>('SELECT max(id) AS n FROM messages'),
      maxDedupedId: d.prepare<[], { n: number | null }>('SELECT max(message_id) AS n FROM dedupe'),

      // A claim reads the oldest ready rows, then leases each by its id. One UPDATE ... WHERE id IN
      // (SELECT ...) RETURNING ... did the same in one statement but cost about 4 times as much
      // (24 µs a message against 6, measured on 60,000 rows): SQLite buffers RETURNING rows in
      // an ephemeral table. Only what the claim does not already know is read: a waiting row
      // has no dead_at or dead_reason (replay clears them); state, lease and queue are set here.
      claimPick: d.prepare<[number, number, number], ClaimedRow>(
        'SELECT id, visible_at, attempts, enqueued_at, expires_at, body, size, extra, last_error FROM messages WHERE queue_id = ? AND state = 0 AND visible_at <= ? ORDER BY visible_at, seq LIMIT ?',
      ),
      claimOne: d.prepare('UPDATE messages SET state = 1, attempts = ?, lease_token = ?, lease_until = ? WHERE id = ?'),
      // A receipt is good only for its own delivery and only until its lease ends.
      leasedRow: d.prepare<[number, number, number], DueRow>('SELECT id, queue_id, state, attempts, lease_until, size FROM messages WHERE id = ? AND state = 1 AND lease_token = ? AND lease_until > ?'),
      deleteById: d.prepare('DELETE FROM messages WHERE id = ?'),
      requeue: d.prepare('UPDATE messages SET state = 0, visible_at = ?, seq = ?, lease_until = NULL, lease_token = NULL, last_error = COALESCE(?, last_error) WHERE id = ?'),
      toDead: d.prepare('UPDATE messages SET state = 2, lease_until = NULL, lease_token = NULL, dead_at = ?, dead_reason = ?, last_error = COALESCE(?, last_error), expires_at = ?, seq = ? WHERE id = ?'),
      extend: d.prepare('UPDATE messages SET lease_until = ? WHERE id = ?'),
      // visible_at and seq are as the claim found them: the message is back where it was.
      unclaim: d.prepare('UPDATE messages SET state = 0, attempts = attempts - 1, lease_until = NULL, lease_token = NULL WHERE id = ? AND state = 1'),

      nextLease: d.prepare<[], { t: number | null }>('SELECT min(lease_until) AS t FROM messages WHERE state = 1'),
      nextExpiry: d.prepare<[], { t: number | null }>('SELECT min(expires_at) AS t FROM messages WHERE expires_at IS NOT NULL'),
      dueLeases: d.prepare<[number, number], DueRow>('SELECT id, queue_id, state, attempts, lease_until, size FROM messages WHERE state = 1 AND lease_until <= ? ORDER BY lease_until, seq LIMIT ?'),
      dueExpiry: d.prepare<[number, number], DueRow>('SELECT id, queue_id, state, attempts, lease_until, size FROM messages WHERE expires_at IS NOT NULL AND expires_at <= ? ORDER BY expires_at LIMIT ?'),
      nextDelayed: d.prepare<[number, number], { t: number | null }>('SELECT min(visible_at) AS t FROM messages WHERE queue_id = ? AND state = 0 AND visible_at > ?'),
      oldestReady: d.prepare<[number, number], { visible_at: number }>('SELECT visible_at FROM messages WHERE queue_id = ? AND state = 0 AND visible_at <= ? ORDER BY visible_at, seq LIMIT 1'),
      countDelayed: d.prepare<[number, number], { n: number }>('SELECT count(*) AS n FROM messages WHERE queue_id = ? AND state = 0 AND visible_at > ?'),
      readyAtMost: d.prepare<[number, number, number], { n: number }>('SELECT count(*) AS n FROM (SELECT 1 FROM messages WHERE queue_id = ? AND state = 0 AND visible_at <= ? LIMIT ?)'),

      deadOldest: d.prepare<[number, number], { id: number; size: number }>('SELECT id, size FROM messages WHERE queue_id = ? AND state = 2 ORDER BY dead_at, seq LIMIT ?'),
      deadRow: d.prepare<[number, number], { id: number; size: number }>('SELECT id, size FROM messages WHERE id = ? AND queue_id = ? AND state = 2'),
      replay: d.prepare('UPDATE messages SET state = 0, attempts = 0, visible_at = ?, seq = ?, expires_at = ?, dead_at = NULL, dead_reason = NULL, last_error = NULL WHERE id = ?'),
      purgeDeadAll: d.prepare('DELETE FROM messages WHERE queue_id = ? AND state = 2'),
      purgeLive: d.prepare<[number], { size: number; state: number }>('DELETE FROM messages WHERE queue_id = ? AND state IN (0, 1) RETURNING size, state'),

      messageById: d.prepare<[number, number], MessageRow>('SELECT * FROM messages WHERE id = ? AND queue_id = ?'),
      deadPage: d.prepare<[number, number, number, number, number], MessageRow>(
        'SELECT * FROM messages WHERE queue_id = ? AND state = 2 AND (dead_at > ? OR (dead_at = ? AND seq > ?)) ORDER BY dead_at, seq LIMIT ?',
      ),

      nsGet: d.prepare<[string], { ns: string; daily_quota: number | null; day: number; used: number }>('SELECT * FROM namespaces WHERE ns = ?'),
      nsQuota: d.prepare('INSERT INTO namespaces (ns, daily_quota) VALUES (?, ?) ON CONFLICT (ns) DO UPDATE SET daily_quota = excluded.daily_quota'),
      nsUse: d.prepare('INSERT INTO namespaces (ns, daily_quota, day, used) VALUES (?, NULL, ?, ?) ON CONFLICT (ns) DO UPDATE SET used = CASE WHEN day = excluded.day THEN used + excluded.used ELSE excluded.used END, day = excluded.day'),

      auditInsert: d.prepare('INSERT INTO audit (at, token, token_id, ns, queue, action, count, detail) VALUES (?, ?, ?, ?, ?, ?, ?, ?)'),

      lagGet: d.prepare<[number, number], { peak_depth: number; max_wait_ms: number }>('SELECT peak_depth, max_wait_ms FROM lag WHERE queue_id = ? AND start = ?'),
      lagPut: d.prepare('INSERT INTO lag (queue_id, start, peak_depth, max_wait_ms, end_depth) VALUES (?, ?, ?, ?, ?) ON CONFLICT (queue_id, start) DO UPDATE SET peak_depth = max(peak_depth, excluded.peak_depth), max_wait_ms = max(max_wait_ms, excluded.max_wait_ms), end_depth = excluded.end_depth'),
      lagRange: d.prepare<[number, number], LagRow>('SELECT start, peak_depth, max_wait_ms, end_depth FROM lag WHERE queue_id = ? AND start >= ? ORDER BY start'),
      lagBefore: d.prepare<[number, number], LagRow>('SELECT start, peak_depth, max_wait_ms, end_depth FROM lag WHERE queue_id = ? AND start < ? ORDER BY start DESC LIMIT 1'),
      lagSweep: d.prepare('DELETE FROM lag WHERE start < ?'),
      lagLatest: d.prepare<[], { start: number | null }>('SELECT max(start) AS start FROM lag'),

      begin: d.prepare('BEGIN'),
      commit: d.prepare('COMMIT'),
      rollback: d.prepare('ROLLBACK'),
      nestedBegin: d.prepare('SAVEPOINT tx'),
      nestedRelease: d.prepare('RELEASE tx'),
      nestedRollback: d.prepare('ROLLBACK TO tx'),
      savepoint: d.prepare('SAVEPOINT op'),
      release: d.prepare('RELEASE op'),
      rollbackTo: d.prepare('ROLLBACK TO op'),

      tokenGet: d.prepare<[string], { token: string; name: string; access: string; ns: string | null }>('SELECT * FROM tokens WHERE token = ?'),
      tokenPut: d.prepare('INSERT OR REPLACE INTO tokens (token, name, access, ns, created_at) VALUES (?, ?, ?, ?, ?)'),
    };
  }

  /** Runs `fn` in a transaction (a savepoint when one is already open). */
  transaction<T>(fn: () => T): T {
    const base = this.undo.length;
    const marks = this.marks.length;
    // Prepared BEGIN / COMMIT instead of db.transaction(fn), which builds a new wrapper per call.
    const nested = this.db.inTransaction;
    try {
      if (nested) this.s.nestedBegin.run();
      else this.s.begin.run();
      const result = fn();
      if (nested) this.s.nestedRelease.run();
      else {
        this.s.commit.run();
        this.undo.length = 0;
      }
      return result;
    } catch (e) {
      // SQLite may have rolled the whole transaction back already (an I/O error, a full disk).
      if (nested && this.db.inTransaction) {
        this.s.nestedRollback.run();
        this.s.nestedRelease.run();
      } else if (!nested && this.db.inTransaction) {
        this.s.rollback.run();
      }
      // Rolled back (or the commit failed): undo what memory learned inside.
      this.revertTo(base);
      this.marks.length = marks;
      this.forgetCached();
      throw e;
    }
  }

  /** Opens a savepoint inside the open transaction: one per operation of a group commit. */
  savepoint(): void {
    this.s.savepoint.run();
    this.marks.push(this.undo.length);
  }

  /** Keeps what was done since savepoint(). */
  releaseSavepoint(): void {
    this.s.release.run();
    this.marks.pop();
  }

  /** Undoes everything since savepoint(), and closes it. */
  rollbackSavepoint(): void {
    this.s.rollbackTo.run();
    this.s.release.run();
    this.revertTo(this.marks.pop() ?? 0);
    this.forgetCached();
  }

  /**
   * Every queue's row is held here, and its counts here are the exact ones: they move with the
   * messages in the same transaction (bump), and a rollback undoes them (undo). The queues table
   * gets them lazily, from flushCounts() when the engine is idle and at close, so a commit writes
   * no queue row. While the table is behind, meta.counts_dirty is '1' (written in the same
   * transaction as the first change after a flush), and a store opened on such a file counts its
   * messages again before anything else (recount): after a kill -9 the counts are still exact.
   */
  private readonly queues = new Map<number, QueueRow>();
  private readonly queueIds = new Map<string, number>();
  /** Queues whose counts changed since the last flush. */
  private readonly changed = new Set<number>();
  /** Whether the table's counts may be behind (mirrors meta.counts_dirty). */
  private countsDirty = false;
  /** How many queues hold waiting messages, kept with the counts. */
  private waitingQueues = 0;
  /** Undo steps of the open transaction, newest last; savepoints mark positions in it. */
  private readonly undo: (() => void)[] = [];
  private readonly marks: number[] = [];

  private revertTo(n: number): void {
    while (this.undo.length > n) this.undo.pop()!();
  }

  /** Records how to undo a change made to memory, when a transaction could still roll it back. */
  private onRollback(step: () => void): void {
    if (this.db.inTransaction) this.undo.push(step);
  }

  private remember(row: QueueRow): QueueRow {
    this.queues.set(row.id, row);
    this.queueIds.set(`${row.ns}\u0000${row.name}`, row.id);
    if (row.n_waiting > 0) this.waitingQueues++;
    return row;
  }

  private forget(row: QueueRow): void {
    this.queues.delete(row.id);
    this.queueIds.delete(`${row.ns}\u0000${row.name}`);
    if (row.n_waiting > 0) this.waitingQueues--;
  }

  /** The held row, or the table's (a queue this store has not seen yet), held from now on. */
  private held(id: number): QueueRow | undefined {
    const hit = this.queues.get(id);
    if (hit) return hit;
    const row = this.s.queueById.get(id);
    return row ? this.remember(row) : undefined;
  }

  /** A row read from the table, with the exact counts. */
  private withCounts(row: QueueRow): QueueRow {
    const h = this.queues.get(row.id);
    return h ? { ...h } : row;
  }

  private loadQueues(): void {
    if (this.file && this.getMeta('counts_dirty') === '1') this.recount();
    for (const row of this.s.queuesAll.all()) this.remember(row);
    // In memory nothing is persisted: the flag stays set and is never written.
    this.countsDirty = this.file === null;
  }

  /** Counts every queue's messages again (a store that stopped with its table's counts behind). */
  private recount(): void {
    this.transaction(() => {
      this.db.prepare('UPDATE queues SET n_waiting = 0, n_leased = 0, n_dead = 0, live_bytes = 0').run();
      const rows = this.db
        .prepare<[], { queue_id: number; w: number; l: number; d: number; b: number }>(
          `SELECT queue_id, sum(state = ${WAITING}) AS w, sum(state = ${LEASED}) AS l, sum(state = ${DEAD}) AS d,
             sum(CASE WHEN state = ${DEAD} THEN 0 ELSE size END) AS b FROM messages GROUP BY queue_id`,
        )
        .all();
      for (const r of rows) this.s.queueCounts.run(r.w, r.l, r.d, r.b, r.queue_id);
      this.setMeta('counts_dirty', '0');
    });
  }

  /** Writes the counts that changed since the last flush to the queues table (one transaction). */
  flushCounts(): void {
    if (!this.countsDirty || this.file === null || !this.db.open || this.db.inTransaction) return;
    this.transaction(() => {
      for (const id of this.changed) {
        const q = this.queues.get(id);
        if (q) this.s.queueCounts.run(q.n_waiting, q.n_leased, q.n_dead, q.live_bytes, id);
      }
      this.setMeta('counts_dirty', '0');
    });
    this.changed.clear();
    this.countsDirty = false;
  }

  private forgetCached(): void {
    this.dueFloor = undefined;
  }

  close(): void {
    if (!this.db.open) return;
    try {
      this.flushCounts();
    } catch {
      // Cannot write now (disk full): the flag is still set, and the next open counts again.
    }
    this.db.close();
    this.unlock();
  }

  /**
   * Closes a store whose start failed after it opened (a port in use): a database this open
   * created is removed again, and the directory too if it made it and it is empty, so the failed
   * start leaves the disk as it found it. A database that was there before is only closed.
   */
  discard(): void {
    if (!this.fresh || !this.file) return this.close();
    if (this.db.open) this.db.close();
    // Nothing here may hide the error that made the start fail.
    try {
      for (const f of [this.file, `${this.file}-wal`, `${this.file}-shm`]) fs.rmSync(f, { force: true });
    } catch {
      // left behind: a later start opens it as an empty database
    }
    // Only now: a start waiting on the lock must not open a file that is about to be removed.
    this.unlock();
    Store.removeCreated(path.dirname(this.file), this.createdDir);
  }

  /** Writes the counts, then copies the WAL back into the database without waiting on readers (no-op in memory). */
  checkpointIdle(): void {
    if (!this.file || !this.db.open) return;
    this.flushCounts();
    this.db.pragma('wal_checkpoint(PASSIVE)');
  }

  // ---- meta and tokens

  getMeta(key: string): string | null {
    return this.s.metaGet.get(key)?.value ?? null;
  }

  setMeta(key: string, value: string): void {
    this.s.metaSet.run(key, value);
  }

  getToken(token: string): TokenRow | null {
    return this.s.tokenGet.get(token) ?? null;
  }

  putToken(token: string, name: string, access: string, ns: string | null, now: number): void {
    this.s.tokenPut.run(token, name, access, ns, now);
  }

  // ---- queues

  // Copies: the caller keeps the counts as they were when it asked.
  queueByName(ns: string, name: string): QueueRow | undefined {
    const id = this.queueIds.get(`${ns}\u0000${name}`);
    const hit = id === undefined ? undefined : this.queues.get(id);
    if (hit) return { ...hit };
    const row = this.s.queueByName.get(ns, name);
    return row ? { ...this.remember(row) } : undefined;
  }

  queueByPubId(pubId: string): QueueRow | undefined {
    const row = this.s.queueByPubId.get(pubId);
    return row && this.withCounts(row);
  }

  queueById(id: number): QueueRow | undefined {
    const row = this.held(id);
    return row && { ...row };
  }

  /** The queue's policy and consumer settings as stored (JSON text). */
  queueSettings(queueId: number): { policy: string; consumer: string | null } | undefined {
    return this.s.queueSettings.get(queueId);
  }

  /** Has any namespace a quota of its own? */
  anyQuota(): boolean {
    return this.s.anyQuota.get()!.n === 1;
  }

  /** Does any queue hold waiting messages? */
  anyWaiting(): boolean {
    return this.waitingQueues > 0;
  }

  listQueues(ns?: string): QueueRow[] {
    return (ns === undefined ? this.s.queuesAll.all() : this.s.queuesInNs.all(ns)).map((r) => this.withCounts(r));
  }

  createQueue(pubId: string, ns: string, name: string, dialect: string, policy: string, consumer: string | null, now: number): QueueRow {
    const r = this.s.queueInsert.run(pubId, ns, name, dialect, policy, consumer, now);
    const row = this.remember(this.s.queueById.get(Number(r.lastInsertRowid))!);
    this.onRollback(() => this.forget(row));
    return { ...row };
  }

  setPolicy(queueId: number, policy: string): void {
    this.s.queuePolicy.run(policy, queueId);
  }

  /**
   * A queue's max message age or dead retention changed: each message's expiry keeps its start
   * (first push or replay; death) and takes the new length. A limit newly set counts from the
   * first push; one removed clears the live expiries. Expiries may now be earlier or already past:
   * the due bound is dropped so the next look finds them.
   */
  reExpire(queueId: number, age: { from: number | null; to: number | null }, deadRetentionDelta: number): void {
    if (age.from !== age.to) {
      if (age.to === null) this.s.liveExpiryOff.run(queueId);
      else if (age.from === null) this.s.liveExpiryFrom.run(age.to, queueId);
      else {
        this.s.shiftExpiry.run(age.to - age.from, queueId, WAITING);
        this.s.shiftExpiry.run(age.to - age.from, queueId, LEASED);
      }
    }
    if (deadRetentionDelta !== 0) this.s.shiftExpiry.run(deadRetentionDelta, queueId, DEAD);
    this.dueFloor = undefined;
  }

  setConsumer(queueId: number, consumer: string | null): void {
    this.s.queueConsumer.run(consumer, queueId);
  }

  deleteQueue(queueId: number): void {
    const row = this.queues.get(queueId);
    if (row) {
      this.forget(row);
      this.onRollback(() => this.remember(row));
    }
    this.s.queueMessagesDelete.run(queueId);
    this.s.queueDedupeDelete.run(queueId);
    this.s.queueLagDelete.run(queueId);
    this.s.queueDelete.run(queueId);
  }

  /** Moves a queue's counts (see `queues` above for how they reach the table). */
  private bump(queueId: number, waiting: number, leased: number, dead: number, bytes: number): void {
    if (!(waiting || leased || dead || bytes)) return;
    const q = this.held(queueId);
    if (!q) return;
    if (!this.countsDirty) {
      this.setMeta('counts_dirty', '1');
      this.countsDirty = true;
      this.onRollback(() => {
        this.countsDirty = false;
      });
    }
    this.move(q, waiting, leased, dead, bytes);
    this.changed.add(queueId);
    this.onRollback(() => this.move(q, -waiting, -leased, -dead, -bytes));
  }

  private move(q: QueueRow, waiting: number, leased: number, dead: number, bytes: number): void {
    const had = q.n_waiting > 0;
    q.n_waiting += waiting;
    q.n_leased += leased;
    q.n_dead += dead;
    q.live_bytes += bytes;
    if (had !== q.n_waiting > 0 && this.queues.get(q.id) === q) this.waitingQueues += had ? -1 : 1;
  }

  // ---- enqueue

  /** A live dedupe owner for `key`, or null. */
  dedupeOwner(queueId: number, key: string, now: number): number | null {
    const row = this.s.dedupeGet.get(queueId, key);
    return row && row.expires_at > now ? row.message_id : null;
  }

  /**
   * Message ids are never handed out twice, so a dedupe key, a dead letter's id or an audit line
   * never comes to name another message. Ids are given in blocks: meta.message_id_floor, written
   * in the same transaction as the first id of each block, is above every id handed out, and a
   * restarted store starts there (or above the highest id it still holds). One meta write per
   * block instead of AUTOINCREMENT's sqlite_sequence update per insert.
   */
  private nextMessageId: number | undefined = undefined;
  private idsReservedBelow = 0;

  private allocateMessageId(): number {
    if (this.nextMessageId === undefined) {
      const floor = Number(this.getMeta('message_id_floor') ?? 1);
      const held = (this.s.maxMessageId.get()!.n ?? 0) + 1;
      const named = (this.s.maxDedupedId.get()!.n ?? 0) + 1;
      this.nextMessageId = Math.max(floor, held, named);
      this.idsReservedBelow = floor;
    }
    const id = this.nextMessageId++;
    const reserved = this.idsReservedBelow;
    if (id >= reserved) {
      this.idsReservedBelow = id + MESSAGE_ID_BLOCK;
      this.setMeta('message_id_floor', String(this.idsReservedBelow));
    }
    // A rolled-back push gives its id back (and its block, whose meta write rolled back with it),
    // so a refused write leaves no gap in the ids.
    this.onRollback(() => {
      this.nextMessageId = id;
      this.idsReservedBelow = reserved;
    });
    return id;
  }

  /**
   * A place at the back of the queue for a message that waits again (requeue, replay). It comes
   * from the id allocator, so it is above every id and seq handed out before, across restarts too.
   */
  private freshSeq(): number {
    return this.allocateMessageId();
  }

  /** Inserts messages (dedupe already checked by the caller in the same transaction). */
  enqueue(queueId: number, items: NewMessage[], now: number): number[] {
    const ids: number[] = new Array(items.length);
    let bytes = 0;
    for (let i = 0; i < items.length; i++) {
      const m = items[i];
      ids[i] = this.allocateMessageId();
      this.noteDue(m.expiresAt);
      if (m.dedupeKey !== null) {
        this.s.dedupePut.run(queueId, m.dedupeKey, ids[i], m.dedupeUntil);
        this.dedupeWritten++;
      }
      bytes += m.size;
    }
    let i = 0;
    if (items.length >= INSERT_CHUNK) {
      const chunk: unknown[] = new Array(INSERT_CHUNK * INSERT_PARAMS);
      for (; i + INSERT_CHUNK <= items.length; i += INSERT_CHUNK) {
        for (let k = 0; k < INSERT_CHUNK; k++) bindInsert(chunk, k * INSERT_PARAMS, ids[i + k], queueId, now, items[i + k]);
        this.s.insertChunk.run(chunk);
      }
    }
    const one: unknown[] = new Array(INSERT_PARAMS);
    for (; i < items.length; i++) {
      bindInsert(one, 0, ids[i], queueId, now, items[i]);
      this.s.insert.run(one);
    }
    this.bump(queueId, items.length, 0, 0, bytes);
    return ids;
  }

  // ---- lease and settle

  claim(queueId: number, max: number, now: number, leaseUntil: number, token: number, maxBytes = Infinity): MessageRow[] {
    // In the order of the index: oldest visible first, then by id.
    const picked = this.s.claimPick.all(queueId, now, max);
    picked.length = countWithin(picked, max, maxBytes); // the rest stay ready, for the next pull
    const rows: MessageRow[] = new Array(picked.length);
    for (let i = 0; i < picked.length; i++) {
      const r = picked[i];
      const attempts = r.attempts + 1;
      this.s.claimOne.run(attempts, token, leaseUntil, r.id);
      rows[i] = {
        id: r.id,
        queue_id: queueId,
        state: LEASED,
        visible_at: r.visible_at,
        lease_until: leaseUntil,
        lease_token: token,
        attempts,
        enqueued_at: r.enqueued_at,
        expires_at: r.expires_at,
        body: r.body,
        size: r.size,
        extra: r.extra,
        dead_at: null,
        dead_reason: null,
        last_error: r.last_error,
      };
    }
    if (rows.length > 0) this.noteDue(leaseUntil);
    this.bump(queueId, -rows.length, rows.length, 0, 0);
    return rows;
  }

  leased(id: number, token: number, now: number): DueRow | undefined {
    return this.s.leasedRow.get(id, token, now);
  }

  /** Deletes acked messages; the counts move once per queue. */
  ack(rows: readonly DueRow[]): void {
    let queueId = -1;
    let n = 0;
    let bytes = 0;
    for (const row of rows) {
      if (row.queue_id !== queueId) {
        if (n > 0) this.bump(queueId, 0, -n, 0, -bytes);
        queueId = row.queue_id;
        n = 0;
        bytes = 0;
      }
      this.s.deleteById.run(row.id);
      n++;
      bytes += row.size;
    }
    if (n > 0) this.bump(queueId, 0, -n, 0, -bytes);
  }

  requeue(row: { id: number; queue_id: number }, visibleAt: number, error: string | null): void {
    this.s.requeue.run(visibleAt, this.freshSeq(), error, row.id);
    this.bump(row.queue_id, 1, -1, 0, 0);
  }

  unclaim(row: { id: number; queue_id: number }): void {
    if (this.s.unclaim.run(row.id).changes === 1) this.bump(row.queue_id, 1, -1, 0, 0);
  }

  /** Moves a live message (waiting or leased) to the dead letters. */
  kill(row: { id: number; queue_id: number; state: number; size: number }, now: number, reason: string, error: string | null, deadUntil: number): void {
    // A fresh seq: dead letters that died in the same millisecond list in the order they died.
    this.s.toDead.run(now, reason, error, deadUntil, this.freshSeq(), row.id);
    this.noteDue(deadUntil);
    this.bump(row.queue_id, row.state === WAITING ? -1 : 0, row.state === LEASED ? -1 : 0, 1, -row.size);
  }

  /** Deletes one row of any state (age limit with drop, dead retention). */
  drop(row: { id: number; queue_id: number; state: number; size: number }): void {
    this.s.deleteById.run(row.id);
    const live = row.state !== DEAD;
    this.bump(row.queue_id, row.state === WAITING ? -1 : 0, row.state === LEASED ? -1 : 0, row.state === DEAD ? -1 : 0, live ? -row.size : 0);
  }

  extend(id: number, leaseUntil: number): void {
    this.s.extend.run(leaseUntil, id);
    this.noteDue(leaseUntil);
  }

  // ---- due work

  /**
   * A lower bound of the earliest lease end or expiry, known without a query after it was read
   * once: every statement that sets a lease end or an expiry lowers it, and reading the due rows
   * (which moves them) makes the next call ask SQLite again. Settling only ever makes the true
   * minimum later, so a timer armed for the bound may find nothing to do, but is never late.
   * undefined: unknown, ask SQLite.
   */
  private dueFloor: number | null | undefined = undefined;
  /** Dedupe keys written since takeDedupeWritten() last read it. */
  private dedupeWritten = 0;

  private noteDue(t: number | null): void {
    if (t === null || this.dueFloor === undefined) return;
    if (this.dueFloor === null || t < this.dueFloor) this.dueFloor = t;
  }

  /** The earliest lease end or expiry across all queues (or earlier: see dueFloor), or null. */
  nextDue(): number | null {
    if (this.dueFloor !== undefined) return this.dueFloor;
    const a = this.s.nextLease.get()?.t ?? null;
    const b = this.s.nextExpiry.get()?.t ?? null;
    this.dueFloor = a === null ? b : b === null ? a : Math.min(a, b);
    return this.dueFloor;
  }

  nextDelayed(queueId: number, now: number): number | null {
    return this.s.nextDelayed.get(queueId, now)?.t ?? null;
  }

  dueLeases(now: number, limit: number): DueRow[] {
    this.dueFloor = undefined;
    return this.s.dueLeases.all(now, limit);
  }

  dueExpiries(now: number, limit: number): DueRow[] {
    this.dueFloor = undefined;
    return this.s.dueExpiry.all(now, limit);
  }

  sweepDedupe(now: number, max: number): number {
    return this.s.dedupeSweep.run(now, max).changes;
  }

  /** Dedupe keys written since the last call (how fast keys come in, for the sweep to keep up). */
  takeDedupeWritten(): number {
    const n = this.dedupeWritten;
    this.dedupeWritten = 0;
    return n;
  }

  // ---- dead letters

  replay(queueId: number, ids: number[] | null, max: number, now: number, expiresAt: number | null): number[] {
    const rows = ids === null ? this.s.deadOldest.all(queueId, max) : ids.map((id) => this.s.deadRow.get(id, queueId)).filter((r): r is { id: number; size: number } => !!r);
    let bytes = 0;
    for (const r of rows) {
      this.s.replay.run(now, this.freshSeq(), expiresAt, r.id);
      this.noteDue(expiresAt);
      bytes += r.size;
    }
    this.bump(queueId, rows.length, 0, -rows.length, bytes);
    return rows.map((r) => r.id);
  }

  purgeDead(queueId: number, ids: number[] | null): number[] {
    if (ids === null) {
      const all = this.s.deadOldest.all(queueId, -1).map((r) => r.id);
      this.s.purgeDeadAll.run(queueId);
      this.bump(queueId, 0, 0, -all.length, 0);
      return all;
    }
    const gone: number[] = [];
    for (const id of ids) {
      if (this.s.deadRow.get(id, queueId)) {
        this.s.deleteById.run(id);
        gone.push(id);
      }
    }
    this.bump(queueId, 0, 0, -gone.length, 0);
    return gone;
  }

  purgeLive(queueId: number): number {
    const rows = this.s.purgeLive.all(queueId);
    let waiting = 0;
    let leased = 0;
    let bytes = 0;
    for (const r of rows) {
      if (r.state === WAITING) waiting++;
      else leased++;
      bytes += r.size;
    }
    this.bump(queueId, -waiting, -leased, 0, -bytes);
    return rows.length;
  }

  // ---- reads

  message(queueId: number, id: number): MessageRow | undefined {
    return this.s.messageById.get(id, queueId);
  }

  /** Messages in the chosen states, by id, after `afterId`; `search` matches body text. */
  peek(queueId: number, states: readonly string[], now: number, afterId: number, limit: number, search: string | null): MessageRow[] {
    const { where, params } = peekWhere(queueId, states, now, search);
    params.push(afterId, limit);
    return this.db.prepare<(number | string)[], MessageRow>(`SELECT * FROM messages WHERE ${where} AND id > ? ORDER BY id LIMIT ?`).all(...params);
  }

  peekCount(queueId: number, states: readonly string[], now: number, search: string | null): number {
    const { where, params } = peekWhere(queueId, states, now, search);
    return this.db.prepare<(number | string)[], { n: number }>(`SELECT count(*) AS n FROM messages WHERE ${where}`).get(...params)!.n;
  }

  deadPage(queueId: number, afterDeadAt: number, afterSeq: number, limit: number): MessageRow[] {
    return this.s.deadPage.all(queueId, afterDeadAt, afterDeadAt, afterSeq, limit);
  }

  oldestReadyAt(queueId: number, now: number): number | null {
    return this.s.oldestReady.get(queueId, now)?.visible_at ?? null;
  }

  countDelayed(queueId: number, now: number): number {
    return this.s.countDelayed.get(queueId, now)!.n;
  }

  /** How many are ready, counting no further than `cap`. */
  readyAtMost(queueId: number, now: number, cap: number): number {
    return this.s.readyAtMost.get(queueId, now, cap)!.n;
  }

  // ---- namespaces and quota

  namespace(ns: string): NamespaceRow | null {
    return this.s.nsGet.get(ns) ?? null;
  }

  setQuota(ns: string, quota: number | null): void {
    this.s.nsQuota.run(ns, quota);
  }

  useQuota(ns: string, day: number, n: number): void {
    this.s.nsUse.run(ns, day, n);
  }

  // ---- audit

  audit(at: number, token: string, tokenId: string | null, ns: string, queue: string, action: string, count: number, detail: string | null): void {
    this.s.auditInsert.run(at, token, tokenId, ns, queue, action, count, detail);
  }

  auditList(ns: string | null, queue: string | null, limit: number): AuditRow[] {
    const where: string[] = [];
    const params: (string | number)[] = [];
    if (ns !== null) {
      where.push('ns = ?');
      params.push(ns);
    }
    if (queue !== null) {
      where.push('queue = ?');
      params.push(queue);
    }
    params.push(limit);
    const sql = `SELECT * FROM audit ${where.length ? 'WHERE ' + where.join(' AND ') : ''} ORDER BY id DESC LIMIT ?`;
    return this.db.prepare<(string | number)[], AuditRow>(sql).all(...params);
  }

  // ---- lag history

  lagPeek(queueId: number, start: number): { peak_depth: number; max_wait_ms: number } | null {
    return this.s.lagGet.get(queueId, start) ?? null;
  }

  /** Raises the step's peaks and records the depth at this moment (carried into quiet steps). */
  lagRecord(queueId: number, start: number, peakDepth: number, waitMs: number, depthNow: number): void {
    this.s.lagPut.run(queueId, start, peakDepth, waitMs, depthNow);
  }

  lagSince(queueId: number, since: number): { before: LagRow | null; rows: LagRow[] } {
    return { before: this.s.lagBefore.get(queueId, since) ?? null, rows: this.s.lagRange.all(queueId, since) };
  }

  lagSweep(before: number): void {
    this.s.lagSweep.run(before);
  }

  lagLatest(): number | null {
    return this.s.lagLatest.get()!.start;
  }
}

function peekWhere(queueId: number, states: readonly string[], now: number, search: string | null) {
  const ors: string[] = [];
  const params: (number | string)[] = [queueId];
  const ready = states.includes('ready');
  const delayed = states.includes('delayed');
  if (ready && delayed) ors.push('state = 0');
  else if (ready) ors.push('(state = 0 AND visible_at <= ' + Math.floor(now) + ')');
  else if (delayed) ors.push('(state = 0 AND visible_at > ' + Math.floor(now) + ')');
  if (states.includes('leased')) ors.push('state = 1');
  if (states.includes('dead')) ors.push('state = 2');
  let where = `queue_id = ? AND (${ors.length ? ors.join(' OR ') : '0'})`;
  if (search) {
    // Bodies are stored as JSON text, where a string's " and \ (and control characters) are
    // escaped. A search that holds them also matches a string (a value or a key) that holds it as
    // typed: the escaped form finds candidates fast, and the decoded strings decide (the escaped
    // form alone would match inside another escape: a newline in "C:\\new").
    const escaped = JSON.stringify(search).slice(1, -1);
    if (escaped === search) {
      where += ' AND instr(body, ?) > 0';
      params.push(search);
    } else {
      where +=
        " AND (instr(body, ?) > 0 OR (instr(body, ?) > 0 AND EXISTS (SELECT 1 FROM json_tree(messages.body) WHERE (type = 'text' AND instr(atom, ?) > 0) OR (typeof(key) = 'text' AND instr(key, ?) > 0))))";
      params.push(search, escaped, search, search);
    }
  }
  return { where, params };
}
