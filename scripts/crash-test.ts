// kill -9 harness (issue 5). Runs producers and consumers over WebSocket against the built emulator
// (`node dist/emulator/cli.js start`) on a data directory, SIGKILLs it at random moments, restarts
// it on the same directory and port, lets the clients reconnect, and repeats. At the end it checks
// the clients' own records against the store:
//   - every answered push is acked, or still in the store (dead ones with a reason);
//   - no message whose ack was answered is delivered again, or still in the store;
//   - no body is stored twice (each push is attempted once, so a second row would be a duplicate);
//   - the per-queue counters equal the rows; PRAGMA integrity_check is ok.
//
//   npx tsx scripts/crash-test.ts [--kills 200] [--producers 4] [--consumers 3] [--seed N] [--out file.json]
//
// Exit status 1 on any loss, duplicate or inconsistency.

import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { Connection } from '../emulator/clients/connection';
import type { QuaysideError } from '../emulator/errors';
import { ensureBuilt, kill9, rssKb, startChild, isFailure, tempDir, sleep, type Child } from '../test/reliability/support';

export interface CrashOptions {
  kills: number;
  producers?: number;
  consumers?: number;
  /** Real-time range (ms) the emulator runs between a start and its kill. */
  runMs?: [number, number];
  seed?: number;
  dataDir?: string;
  log?: (line: string) => void;
  /** Soak mode: no kills; run this long (ms), sampling the emulator's RSS, then kill -9 it once and check. */
  soakMs?: number;
  /** A pause (ms) after each push, so consumers can keep up in a long run. */
  producerPauseMs?: number;
  /** Test hook: changes the file after the last kill, before the check (to prove the check catches damage). */
  tamper?: (db: Database.Database, answered: ReadonlyMap<string, string>) => void;
}

export interface CrashFigures {
  kills: number;
  restarts: number;
  restartMsAvg: number;
  restartMsMax: number;
  pushesAttempted: number;
  answeredPushes: number;
  deliveries: number;
  redeliveries: number;
  answeredAcks: number;
  ackNotAnswered: number;
  answeredNacks: number;
  answeredDeadLetters: number;
  answeredReplays: number;
  replayedMessages: number;
  /** How many kills landed while requests of each kind were in flight. */
  killsDuring: Record<string, number>;
  rowsAtEnd: number;
  deadAtEnd: number;
  losses: number;
  duplicates: number;
  redeliveredAfterAck: number;
  ackedButStored: number;
  phantoms: number;
  idMismatches: number;
  deadWithoutReason: number;
  countMismatches: number;
  unexpectedErrors: number;
  integrity: string;
  failures: string[];
  seconds: number;
  /** Soak mode: RSS samples (KiB), one a second. */
  rssKb?: number[];
}

const NS = 'crash';
const QUEUE = 'jobs';

/** A small seeded PRNG, so a failing run can be repeated with --seed. */
function rng(seed: number) {
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    return (s >>> 0) / 4294967296;
  };
}

export async function runCrashTest(opts: CrashOptions): Promise<CrashFigures> {
  ensureBuilt();
  const log = opts.log ?? (() => {});
  const seed = opts.seed ?? (Date.now() & 0x7fffffff);
  const rand = rng(seed);
  const [runMin, runMax] = opts.runMs ?? [150, 900];
  const dataDir = opts.dataDir ?? tempDir('quayside-crash-');
  const token = 'qs_rw_crash_test_token';
  const t0 = Date.now();
  log(`crash test: ${opts.kills} kills, seed ${seed}, data in ${dataDir}`);

  // ---- the clients' records
  const attempted = new Set<string>();
  const answered = new Map<string, string>(); // key → message id
  const ackAnsweredAt = new Map<string, number>(); // key → when an ack was answered ok
  const ackUnknown = new Set<string>(); // an ack was sent and not answered (or a batch partly stale)
  const deliveredCount = new Map<string, number>();
  const failures: string[] = [];
  const inFlight: Record<string, number> = { push: 0, 'push.batch': 0, pull: 0, ack: 0, 'ack.batch': 0, nack: 0, 'dead.replay': 0 };
  const killsDuring: Record<string, number> = { ...Object.fromEntries(Object.keys(inFlight).map((k) => [k, 0])), anyWrite: 0 };
  const f = {
    deliveries: 0, redeliveries: 0, answeredAcks: 0, answeredNacks: 0, answeredDeadLetters: 0, answeredReplays: 0,
    replayedMessages: 0, redeliveredAfterAck: 0, unexpectedErrors: 0,
  };
  const fail = (msg: string) => {
    if (failures.length < 50) failures.push(msg);
  };

  let child: Child | null = null;
  let port = 0;
  const restartMs: number[] = [];
  const start = async (): Promise<Child> => {
    for (let attempt = 0; ; attempt++) {
      const began = Date.now();
      const c = await startChild({ dataDir, port, token, timeoutMs: 20000 });
      if (!isFailure(c)) {
        restartMs.push(Date.now() - began);
        port = c.port;
        return c;
      }
      if (c.code === 'port_in_use' && attempt < 20) {
        await sleep(100);
        continue;
      }
      throw new Error(`the emulator did not restart on ${dataDir}: ${c.code}: ${c.message}`);
    }
  };
  child = await start();
  const url = child.url;

  const setup = new Connection({ url, token, connectTimeoutMs: 20000 });
  await setup.request('queue.create', { namespace: NS, queue: QUEUE, dialect: 'cache', ifNotExists: true });
  await setup.close();

  let running = true;
  const conns: Connection[] = [];
  const client = (name: string) => {
    const c = new Connection({ url, token, connectTimeoutMs: 20000, client: name });
    conns.push(c);
    return c;
  };
  const track = async <T>(op: string, p: () => Promise<T>): Promise<T> => {
    inFlight[op]++;
    try {
      return await p();
    } finally {
      inFlight[op]--;
    }
  };
  const expected = (e: unknown) => {
    const code = (e as QuaysideError).code;
    if (code === 'unavailable') return true;
    f.unexpectedErrors++;
    fail(`unexpected error: ${code}: ${(e as Error).message}`);
    return false;
  };

  const producer = async (p: number) => {
    const conn = client(`producer-${p}`);
    let seq = 0;
    while (running) {
      const n = rand() < 0.3 ? 2 + Math.floor(rand() * 4) : 1;
      const keys = Array.from({ length: n }, () => `p${p}-${++seq}`);
      const bodies = keys.map((k) => ({ k, pad: 'x'.repeat(Math.floor(rand() * 300)) }));
      for (const k of keys) attempted.add(k);
      try {
        if (n === 1) {
          const r = await track('push', () => conn.request('push', { namespace: NS, queue: QUEUE, body: bodies[0] }));
          answered.set(keys[0], r.id);
        } else {
          const r = await track('push.batch', () => conn.request('push.batch', { namespace: NS, queue: QUEUE, messages: bodies.map((body) => ({ body })) }));
          r.results.forEach((x, i) => answered.set(keys[i], x.id));
        }
      } catch (e) {
        // Not answered: it may or may not be stored. It is never sent again (so a second copy would be a duplicate).
        if (!expected(e)) await sleep(10);
      }
      if (opts.producerPauseMs) await sleep(opts.producerPauseMs);
    }
    await conn.close();
  };

  const consumer = async (c: number) => {
    const conn = client(`consumer-${c}`);
    while (running) {
      let messages: { id: string; body: unknown; receipt: string; attempts: number }[];
      try {
        messages = (await track('pull', () => conn.request('pull', { namespace: NS, queue: QUEUE, max: 1 + Math.floor(rand() * 8), leaseMs: 3000, waitMs: 200 }))).messages;
      } catch (e) {
        expected(e);
        await sleep(10);
        continue;
      }
      const toAck: { key: string; receipt: string }[] = [];
      for (const m of messages) {
        const key = (m.body as { k: string }).k;
        f.deliveries++;
        const n = (deliveredCount.get(key) ?? 0) + 1;
        deliveredCount.set(key, n);
        if (n > 1) f.redeliveries++;
        if (ackAnsweredAt.has(key)) {
          f.redeliveredAfterAck++;
          fail(`${key} (${m.id}) was delivered again after its ack was answered`);
        }
        if (!attempted.has(key)) fail(`delivered a message nobody pushed: ${JSON.stringify(m.body)}`);
        const roll = rand();
        if (roll < 0.75) toAck.push({ key, receipt: m.receipt });
        else if (roll < 0.88) {
          try {
            const r = await track('nack', () => conn.request('nack', { receipt: m.receipt, delayMs: 0 }));
            if (r.ok) f.answeredNacks++;
          } catch (e) {
            expected(e);
          }
        } else if (roll < 0.95) {
          try {
            const r = await track('nack', () => conn.request('nack', { receipt: m.receipt, dead: true, error: 'crash-test dead letter' }));
            if (r.ok) f.answeredDeadLetters++;
          } catch (e) {
            expected(e);
          }
        } // else: left to its lease, which expires and redelivers it
      }
      if (toAck.length === 0) continue;
      if (toAck.length === 1 || rand() < 0.5) {
        for (const a of toAck) {
          try {
            const r = await track('ack', () => conn.request('ack', { receipt: a.receipt }));
            if (r.ok) {
              ackAnsweredAt.set(a.key, Date.now());
              f.answeredAcks++;
            }
          } catch (e) {
            ackUnknown.add(a.key);
            expected(e);
          }
        }
      } else {
        try {
          const r = await track('ack.batch', () => conn.request('ack.batch', { receipts: toAck.map((a) => a.receipt) }));
          if (r.acked === toAck.length) {
            for (const a of toAck) ackAnsweredAt.set(a.key, Date.now());
            f.answeredAcks += r.acked;
          } else for (const a of toAck) ackUnknown.add(a.key); // which ones were stale is not said
        } catch (e) {
          for (const a of toAck) ackUnknown.add(a.key);
          expected(e);
        }
      }
    }
    await conn.close();
  };

  const admin = async () => {
    const conn = client('admin');
    while (running) {
      await sleep(10 + rand() * 40);
      try {
        const r = await track('dead.replay', () => conn.request('dead.replay', { namespace: NS, queue: QUEUE, max: 1 + Math.floor(rand() * 20) }));
        f.answeredReplays++;
        f.replayedMessages += r.replayed;
      } catch (e) {
        expected(e);
      }
    }
    await conn.close();
  };

  const workers = [
    ...Array.from({ length: opts.producers ?? 4 }, (_, i) => producer(i)),
    ...Array.from({ length: opts.consumers ?? 3 }, (_, i) => consumer(i)),
    admin(),
  ];

  let kills = 0;
  const rss: number[] = [];
  try {
    if (opts.soakMs) {
      const until = Date.now() + opts.soakMs;
      while (Date.now() < until) {
        await sleep(Math.min(1000, until - Date.now()));
        rss.push(rssKb(child!.pid));
        if (rss.length % 60 === 0) log(`  ${rss.length} s: RSS ${Math.round(rss[rss.length - 1] / 1024)} MiB, ${answered.size} answered pushes, ${f.answeredAcks} answered acks`);
      }
      await kill9(child!);
      child = null;
    }
    for (; kills < opts.kills; ) {
      await sleep(runMin + rand() * (runMax - runMin));
      for (const [op, n] of Object.entries(inFlight)) if (n > 0) killsDuring[op]++;
      if (Object.entries(inFlight).some(([op, n]) => op !== 'pull' && n > 0)) killsDuring.anyWrite++;
      await kill9(child!);
      kills++;
      child = null;
      if (kills % 10 === 0) log(`  ${kills} kills, ${answered.size} answered pushes, ${f.answeredAcks} answered acks`);
      // Let the clients notice before it comes back (their requests fail with `unavailable`).
      await sleep(rand() * 100);
      if (kills < opts.kills) child = await start();
    }
  } finally {
    running = false;
    if (child) await kill9(child);
  }
  // The emulator is down: closing the connections fails what the clients still wait for, and their loops end.
  await Promise.all(conns.map((c) => c.close()));
  await Promise.race([Promise.allSettled(workers), sleep(10000)]);

  // ---- what the store holds after the last kill -9
  const db = new Database(path.join(dataDir, 'quayside.db'));
  opts.tamper?.(db, answered);
  const integrity = (db.pragma('integrity_check') as { integrity_check: string }[]).map((r) => r.integrity_check).join('; ');
  const rows = db.prepare('SELECT id, queue_id, state, body, size, dead_reason FROM messages').all() as { id: number; queue_id: number; state: number; body: string; size: number; dead_reason: string | null }[];
  const queues = db.prepare('SELECT id, ns, name, n_waiting, n_leased, n_dead, live_bytes FROM queues').all() as { id: number; ns: string; name: string; n_waiting: number; n_leased: number; n_dead: number; live_bytes: number }[];
  // The table's counts may be behind the rows only while meta.counts_dirty says so (the store then counts again at open).
  const countsDirty = (db.prepare("SELECT value FROM meta WHERE key = 'counts_dirty'").get() as { value: string } | undefined)?.value === '1';
  db.close();

  const byKey = new Map<string, { id: string; state: number; dead_reason: string | null }[]>();
  let phantoms = 0;
  let deadWithoutReason = 0;
  for (const r of rows) {
    const key = (JSON.parse(r.body) as { k?: string }).k ?? '';
    if (!attempted.has(key)) {
      phantoms++;
      fail(`the store holds a message nobody pushed: ${r.body.slice(0, 80)}`);
    }
    if (r.state === 2 && !r.dead_reason) {
      deadWithoutReason++;
      fail(`dead message m_${r.id} has no reason`);
    }
    const list = byKey.get(key) ?? [];
    list.push({ id: `m_${r.id}`, state: r.state, dead_reason: r.dead_reason });
    byKey.set(key, list);
  }
  let duplicates = 0;
  for (const [key, list] of byKey) {
    if (list.length > 1) {
      duplicates += list.length - 1;
      fail(`${key} is stored ${list.length} times (${list.map((x) => x.id).join(', ')})`);
    }
  }
  let losses = 0;
  let ackedButStored = 0;
  let idMismatches = 0;
  for (const [key, id] of answered) {
    const stored = byKey.get(key);
    if (ackAnsweredAt.has(key)) {
      if (stored) {
        ackedButStored++;
        fail(`${key} (${id}): its ack was answered, yet it is still stored (${stored[0].id}, state ${stored[0].state})`);
      }
      continue;
    }
    if (stored) {
      if (stored[0].id !== id) {
        idMismatches++;
        fail(`${key}: the push was answered with ${id}, the store holds it as ${stored[0].id}`);
      }
      continue;
    }
    if (ackUnknown.has(key)) continue; // an ack that was sent may have committed before the kill
    losses++;
    fail(`LOST: ${key} (${id}) was answered, never acked, and is not in the store`);
  }
  let countMismatches = 0;
  const countsOfRows = (queueId: number, of: readonly { queue_id: number; state: number; size: number }[] = rows) => {
    const mine = of.filter((r) => r.queue_id === queueId);
    return {
      n_waiting: mine.filter((r) => r.state === 0).length,
      n_leased: mine.filter((r) => r.state === 1).length,
      n_dead: mine.filter((r) => r.state === 2).length,
      live_bytes: mine.filter((r) => r.state !== 2).reduce((n, r) => n + r.size, 0),
    };
  };
  const compareCounts = (where: string, have: ReturnType<typeof countsOfRows>, want: ReturnType<typeof countsOfRows>) => {
    for (const k of Object.keys(want) as (keyof typeof want)[]) {
      if (have[k] !== want[k]) {
        countMismatches++;
        fail(`${where}: ${k} is ${have[k]}, the rows say ${want[k]}`);
      }
    }
  };
  if (!countsDirty) for (const q of queues) compareCounts(`queue ${q.ns}/${q.name} in the file (counts_dirty not set)`, q, countsOfRows(q.id));
  if (integrity !== 'ok') fail(`integrity_check: ${integrity}`);
  if (answered.size === 0 || f.answeredAcks === 0) fail('the workload did nothing (no answered pushes or acks)');

  // The emulator starts again on what the last kill left, and agrees with the file.
  const last = await start();
  try {
    const conn = new Connection({ url: last.url, token, connectTimeoutMs: 20000 });
    const { counts } = await conn.request('stats', { namespace: NS, queue: QUEUE });
    const total = counts.depth + counts.leased + counts.dead;
    if (total !== rows.length) fail(`after the restart stats count ${total} messages, the file holds ${rows.length}`);
    // The restart may have applied due work (leases that ended while it was down), so each count is
    // compared with the rows as the running emulator now holds them (read, then asked again to be sure nothing moved).
    const q = queues.find((x) => x.ns === NS && x.name === QUEUE);
    if (!q) fail(`the file holds no queue ${NS}/${QUEUE}`);
    else {
      const live = new Database(path.join(dataDir, 'quayside.db'), { readonly: true });
      const want = countsOfRows(q.id, live.prepare('SELECT queue_id, state, size FROM messages').all() as { queue_id: number; state: number; size: number }[]);
      live.close();
      const again = (await conn.request('stats', { namespace: NS, queue: QUEUE })).counts;
      if (JSON.stringify(again) === JSON.stringify(counts)) {
        compareCounts(`after the restart, stats of ${NS}/${QUEUE}`, { n_waiting: counts.depth, n_leased: counts.leased, n_dead: counts.dead, live_bytes: counts.bytes }, want);
      }
    }
    await conn.close();
  } finally {
    await kill9(last);
  }
  if (!opts.dataDir) fs.rmSync(dataDir, { recursive: true, force: true });

  const avg = restartMs.reduce((a, b) => a + b, 0) / Math.max(1, restartMs.length);
  return {
    kills,
    restarts: restartMs.length - 1,
    restartMsAvg: Math.round(avg),
    restartMsMax: Math.max(...restartMs),
    pushesAttempted: attempted.size,
    answeredPushes: answered.size,
    deliveries: f.deliveries,
    redeliveries: f.redeliveries,
    answeredAcks: f.answeredAcks,
    ackNotAnswered: ackUnknown.size,
    answeredNacks: f.answeredNacks,
    answeredDeadLetters: f.answeredDeadLetters,
    answeredReplays: f.answeredReplays,
    replayedMessages: f.replayedMessages,
    killsDuring,
    rowsAtEnd: rows.length,
    deadAtEnd: rows.filter((r) => r.state === 2).length,
    losses,
    duplicates,
    redeliveredAfterAck: f.redeliveredAfterAck,
    ackedButStored,
    phantoms,
    idMismatches,
    deadWithoutReason,
    countMismatches,
    unexpectedErrors: f.unexpectedErrors,
    integrity,
    failures,
    seconds: Math.round((Date.now() - t0) / 100) / 10,
    ...(opts.soakMs ? { rssKb: rss } : {}),
  };
}

export function formatFigures(x: CrashFigures): string {
  const during = Object.entries(x.killsDuring).map(([k, n]) => `${k} ${n}`).join(', ');
  return [
    `kills ${x.kills} (restart avg ${x.restartMsAvg} ms, max ${x.restartMsMax} ms) in ${x.seconds} s`,
    `kills landed with requests in flight: ${during}`,
    `messages pushed ${x.pushesAttempted}, answered pushes ${x.answeredPushes}`,
    `deliveries ${x.deliveries} (redeliveries ${x.redeliveries}), answered acks ${x.answeredAcks}, acks not answered ${x.ackNotAnswered}`,
    `answered nacks ${x.answeredNacks}, dead-lettered ${x.answeredDeadLetters}, replays ${x.answeredReplays} (${x.replayedMessages} messages)`,
    `in the store at the end ${x.rowsAtEnd} (dead ${x.deadAtEnd}); integrity_check ${x.integrity}`,
    `losses ${x.losses}, duplicates ${x.duplicates}, redelivered after ack ${x.redeliveredAfterAck}, acked but stored ${x.ackedButStored}, ` +
      `phantoms ${x.phantoms}, id mismatches ${x.idMismatches}, dead without reason ${x.deadWithoutReason}, count mismatches ${x.countMismatches}, unexpected errors ${x.unexpectedErrors}`,
    ...x.failures.map((m) => `  ! ${m}`),
  ].join('\n');
}

export function crashOk(x: CrashFigures): boolean {
  return x.failures.length === 0;
}

if (require.main === module) {
  const argv = process.argv.slice(2);
  const num = (name: string, dflt: number) => {
    const i = argv.indexOf(`--${name}`);
    return i >= 0 ? Number(argv[i + 1]) : dflt;
  };
  const outI = argv.indexOf('--out');
  runCrashTest({ kills: num('kills', 200), producers: num('producers', 4), consumers: num('consumers', 3), seed: argv.includes('--seed') ? num('seed', 1) : undefined, log: (l) => console.log(l) })
    .then((x) => {
      console.log(formatFigures(x));
      if (outI >= 0) fs.writeFileSync(argv[outI + 1], JSON.stringify(x, null, 2) + '\n');
      process.exit(crashOk(x) ? 0 : 1);
    })
    .catch((e) => {
      console.error(e);
      process.exit(1);
    });
}
