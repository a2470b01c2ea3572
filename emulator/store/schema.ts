// The SQLite schema and its migrations. Each migration runs once, in order, inside a transaction;
// `user_version` records how far a file has come.

export const APPLICATION_ID = 0x51594431; // "QYD1": marks a file as a Quayside database

export const MIGRATIONS: string[] = [
  // 1: the first schema
  `
  CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;

  CREATE TABLE queues (
    id          INTEGER PRIMARY KEY,
    pub_id      TEXT NOT NULL UNIQUE,
    ns          TEXT NOT NULL,
    name        TEXT NOT NULL,
    dialect     TEXT NOT NULL,
    policy      TEXT NOT NULL,
    consumer    TEXT,
    created_at  INTEGER NOT NULL,
    -- counts kept by the same transactions that move messages, so they are never out of step
    n_waiting   INTEGER NOT NULL DEFAULT 0,
    n_leased    INTEGER NOT NULL DEFAULT 0,
    n_dead      INTEGER NOT NULL DEFAULT 0,
    live_bytes  INTEGER NOT NULL DEFAULT 0,
    UNIQUE (ns, name)
  );

  -- state: 0 waiting (ready or delayed by visible_at), 1 leased, 2 dead
  -- AUTOINCREMENT: an id is never handed out twice, so a dedupe key, a dead-letter id or an audit
  -- line never comes to name another message after the first is deleted.
  CREATE TABLE messages (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    queue_id    INTEGER NOT NULL,
    state       INTEGER NOT NULL,
    visible_at  INTEGER NOT NULL,
    lease_until INTEGER,
    lease_token INTEGER,
    attempts    INTEGER NOT NULL DEFAULT 0,
    enqueued_at INTEGER NOT NULL,
    expires_at  INTEGER,
    body        TEXT NOT NULL,
    size        INTEGER NOT NULL,
    extra       TEXT,
    dead_at     INTEGER,
    dead_reason TEXT,
    last_error  TEXT
  );
  CREATE INDEX msg_ready  ON messages (queue_id, visible_at, id) WHERE state = 0;
  CREATE INDEX msg_lease  ON messages (lease_until) WHERE state = 1;
  CREATE INDEX msg_expiry ON messages (expires_at) WHERE expires_at IS NOT NULL;
  CREATE INDEX msg_queue  ON messages (queue_id, state, id);
  CREATE INDEX msg_dead   ON messages (queue_id, dead_at, id) WHERE state = 2;

  CREATE TABLE dedupe (
    queue_id   INTEGER NOT NULL,
    key        TEXT NOT NULL,
    message_id INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    PRIMARY KEY (queue_id, key)
  ) WITHOUT ROWID;

  CREATE TABLE namespaces (
    ns          TEXT PRIMARY KEY,
    daily_quota INTEGER,
    day         INTEGER NOT NULL DEFAULT 0,
    used        INTEGER NOT NULL DEFAULT 0
  ) WITHOUT ROWID;

  CREATE TABLE audit (
    id     INTEGER PRIMARY KEY,
    at     INTEGER NOT NULL,
    token  TEXT NOT NULL,
    ns     TEXT NOT NULL,
    queue  TEXT NOT NULL,
    action TEXT NOT NULL,
    count  INTEGER NOT NULL,
    detail TEXT
  );

  CREATE TABLE lag (
    queue_id    INTEGER NOT NULL,
    start       INTEGER NOT NULL,
    peak_depth  INTEGER NOT NULL,
    max_wait_ms INTEGER NOT NULL,
    end_depth   INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (queue_id, start)
  ) WITHOUT ROWID;

  CREATE TABLE tokens (
    token      TEXT PRIMARY KEY,
    name       TEXT NOT NULL,
    access     TEXT NOT NULL,
    ns         TEXT,
    created_at INTEGER NOT NULL
  ) WITHOUT ROWID;
  `,

  // 2: message ids come from the store's own allocator (store.ts, allocateMessageId) instead of
  // AUTOINCREMENT, which read and rewrote sqlite_sequence on every insert (one more page in every
  // push's commit). The guarantee stays: an id is never handed out twice. meta.message_id_floor
  // holds the lowest id a restarted emulator may hand out; it starts where sqlite_sequence was.
  `
  CREATE TABLE messages_v2 (
    id          INTEGER PRIMARY KEY,
    queue_id    INTEGER NOT NULL,
    state       INTEGER NOT NULL,
    visible_at  INTEGER NOT NULL,
    lease_until INTEGER,
    lease_token INTEGER,
    attempts    INTEGER NOT NULL DEFAULT 0,
    enqueued_at INTEGER NOT NULL,
    expires_at  INTEGER,
    body        TEXT NOT NULL,
    size        INTEGER NOT NULL,
    extra       TEXT,
    dead_at     INTEGER,
    dead_reason TEXT,
    last_error  TEXT
  );
  INSERT INTO messages_v2 (id, queue_id, state, visible_at, lease_until, lease_token, attempts, enqueued_at, expires_at, body, size, extra, dead_at, dead_reason, last_error)
    SELECT id, queue_id, state, visible_at, lease_until, lease_token, attempts, enqueued_at, expires_at, body, size, extra, dead_at, dead_reason, last_error FROM messages ORDER BY id;
  INSERT OR REPLACE INTO meta (key, value)
    SELECT 'message_id_floor', CAST(seq + 1 AS TEXT) FROM sqlite_sequence WHERE name = 'messages';
  DROP TABLE messages;
  ALTER TABLE messages_v2 RENAME TO messages;
  CREATE INDEX msg_ready  ON messages (queue_id, visible_at, id) WHERE state = 0;
  CREATE INDEX msg_lease  ON messages (lease_until) WHERE state = 1;
  CREATE INDEX msg_expiry ON messages (expires_at) WHERE expires_at IS NOT NULL;
  CREATE INDEX msg_queue  ON messages (queue_id, state, id);
  CREATE INDEX msg_dead   ON messages (queue_id, dead_at, id) WHERE state = 2;
  `,

  // 3: a redelivered message goes to the back of its queue even when its new visible_at ties with
  // messages already waiting (always, under the virtual clock). `seq` orders ready messages with
  // the same visible_at, and leases that end at the same instant (they come back in queue order).
  // A new message's seq is its id, and a requeue or replay takes a fresh number from the id
  // allocator, so it sorts after everything pushed before it. Rows written before this migration
  // keep seq NULL, which sorts first and then by rowid: their old order, ahead of every newer
  // message. No row is rewritten, so a large data directory migrates in one index build.
  `
  ALTER TABLE messages ADD COLUMN seq INTEGER;
  DROP INDEX msg_ready;
  CREATE INDEX msg_ready ON messages (queue_id, visible_at, seq) WHERE state = 0;
  DROP INDEX msg_lease;
  CREATE INDEX msg_lease ON messages (lease_until, seq) WHERE state = 1;
  -- Expired dedupe keys are swept in bounded batches at each half-hour step; this finds them.
  CREATE INDEX dedupe_expiry ON dedupe (expires_at);
  -- The cache preset's delay limit went from 12 hours to 7 days; queues stored with the old default get the new one.
  UPDATE queues SET policy = json_set(policy, '$.maxDelayMs', 604800000)
    WHERE dialect = 'cache' AND json_valid(policy) AND json_extract(policy, '$.maxDelayMs') = 43200000;
  `,

  // 4: the audit log says which token acted. A token's name is a label its creator chose (two
  // tokens may share one), so each entry also keeps the token's id: a keyed fingerprint of the
  // secret, stable and unique, never the secret itself. Entries from before keep token_id NULL.
  // And a queue's message size limit is at most 4 MiB, so one message always fits in a request
  // frame: queues stored with more get 4 MiB.
  `
  ALTER TABLE audit ADD COLUMN token_id TEXT;
  UPDATE queues SET policy = json_set(policy, '$.maxPayloadBytes', 4194304)
    WHERE json_valid(policy) AND json_extract(policy, '$.maxPayloadBytes') > 4194304;
  `,

  // 5: dead letters are listed (and replayed, oldest first) in the order they died. Messages that
  // die in the same millisecond (always, under the virtual clock) were ordered by id; a death now
  // takes a fresh seq from the id allocator, and the dead index orders by it. The dead rows already
  // there take their id as seq, so they keep the order they were listed in (and a dead.list cursor
  // from before, `d_<deadAt>_<id>`, still reads right); every later death sorts after them.
  `
  UPDATE messages SET seq = id WHERE state = 2;
  DROP INDEX msg_dead;
  CREATE INDEX msg_dead ON messages (queue_id, dead_at, seq) WHERE state = 2;
  `,
];

export const SCHEMA_VERSION = MIGRATIONS.length;
