// `npx tsx bench/run.ts [--smoke] [--only quayside,bullmq-mem,...] [--budget-min N]`
//
// Starts everything it needs on 127.0.0.1 (free ports), runs each scenario against Quayside and
// each peer in turn (every scenario at least twice, run 1 for all targets, then run 2), stops
// every process it started (also on failure and Ctrl-C), and writes bench/results/latest.json
// (smoke: bench/results/smoke.json) and docs/benchmarks.md (smoke: bench/results/smoke.md).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  BUILD, ROOT, argVal, drive, killAllChildrenSync, liveChildren, log, makeBody, makeTmpDir, median, now, removeTmpDir, rssOf, serverMemory, sleep, startProc, dirSizeMB, type Sample,
} from './lib';
import type { Figure, GoalCheck, Results, TargetInfo } from './results-model';
import { renderMarkdown } from './report';
import { WsEcho, sqliteInserts } from './targets/baseline';
import { BullMQTarget } from './targets/bullmq';
import { AzuriteTarget } from './targets/azurite';
import { PgBossTarget } from './targets/pgboss';
import { QuaysideTarget, buildQuayside, startCli } from './targets/quayside';
import { runQuaysideFaces } from './targets/quayside-faces';
import type { QueueTarget } from './targets/types';

const SMOKE = process.argv.includes('--smoke');
const ONLY = argVal('--only')?.split(',') ?? null;
const SKIP = argVal('--skip')?.split(',') ?? [];
const RUNS = Number(argVal('--runs') ?? 2);

interface Counts {
  seq: number;
  inflight: number;
  batchMsgs: number;
  consume: number;
  depthLevels: number[];
  depthConsume: number;
}

const FULL: Counts = { seq: 10_000, inflight: 30_000, batchMsgs: 200_000, consume: 30_000, depthLevels: [1_000, 100_000, 1_000_000], depthConsume: 30_000 };
const SMOKE_C: Counts = { seq: 300, inflight: 1_000, batchMsgs: 2_000, consume: 1_000, depthLevels: [1_000, 10_000], depthConsume: 500 };
// Azurite runs a few hundred messages a second and slows to ~20/s with 10,000 queued: smaller
// counts, and depth capped at 10,000 (100,000 would take hours to preload and drain).
const AZ_FULL: Counts = { seq: 2_000, inflight: 3_000, batchMsgs: 0, consume: 3_000, depthLevels: [1_000, 10_000], depthConsume: 500 };
const AZ_SMOKE: Counts = { seq: 100, inflight: 200, batchMsgs: 0, consume: 200, depthLevels: [100], depthConsume: 100 };
// pg-boss runs a few thousand messages a second (in either durability): smaller counts than
// Quayside's and BullMQ's, and depth up to 100,000 (preloaded 1,000 jobs per insert).
const PG_FULL: Counts = { seq: 2_000, inflight: 5_000, batchMsgs: 50_000, consume: 5_000, depthLevels: [1_000, 100_000], depthConsume: 3_000 };
const PG_SMOKE: Counts = { seq: 100, inflight: 300, batchMsgs: 1_000, consume: 300, depthLevels: [1_000], depthConsume: 200 };
const C = SMOKE ? SMOKE_C : FULL;
const PG = SMOKE ? PG_SMOKE : PG_FULL;
const PEER_COUNTS: Record<string, Counts> = { azurite: SMOKE ? AZ_SMOKE : AZ_FULL, pgboss: PG, 'pgboss-nofsync': PG };
const countsFor = (t: QueueTarget): Counts => PEER_COUNTS[t.id] ?? C;
/** The smaller counts of the peers that ran (the report describes those only). */
const peerCountsThatRan = () => Object.fromEntries(Object.entries(PEER_COUNTS).filter(([id]) => targetInfos.some((t) => t.id === id && !t.skipped)));

const BUDGET_MS = Number(argVal('--budget-min') ?? (SMOKE ? 3 : 60)) * 60_000;
const T_START = Date.now();
const deadline = T_START + BUDGET_MS;
const timeLeft = () => deadline - Date.now();

const OUT_JSON = path.join(__dirname, 'results', SMOKE ? 'smoke.json' : 'latest.json');
const OUT_MD = SMOKE ? path.join(__dirname, 'results', 'smoke.md') : path.join(ROOT, 'docs', 'benchmarks.md');

// ------------------------------------------------------------------ results

const figures = new Map<string, Figure>();
const errors: string[] = [];
const notes: string[] = [];
const unmeasured: Record<string, string> = {};
const targetInfos: TargetInfo[] = [];

function record(scenario: string, target: string, metric: string, unit: string, value: number, extra: { count?: number; note?: string } = {}): void {
  const key = `${scenario}|${target}|${metric}`;
  let f = figures.get(key);
  if (!f) {
    f = { scenario, target, metric, unit, runs: [], median: NaN, ...extra };
    figures.set(key, f);
  }
  if (extra.note) f.note = extra.note;
  if (extra.count !== undefined) f.count = extra.count;
  f.runs.push(value);
  f.median = median(f.runs);
}

function recordSample(scenario: string, target: string, s: Sample, note?: string): void {
  record(scenario, target, 'rate', 'msgs/s', s.rate, { count: s.count, note });
  if (s.p50 !== undefined) record(scenario, target, 'p50', 'ms', s.p50, { count: s.count });
  if (s.p99 !== undefined) record(scenario, target, 'p99', 'ms', s.p99, { count: s.count });
  log(`  ${scenario.padEnd(24)} ${target.padEnd(11)} ${s.rate.toFixed(0).padStart(8)} msgs/s` + (s.p50 !== undefined ? `  p50 ${s.p50.toFixed(3)} ms  p99 ${s.p99!.toFixed(3)} ms` : '') + `  (${s.count} in ${s.seconds.toFixed(2)} s)`);
}

function fig(scenario: string, target: string, metric = 'rate'): Figure | undefined {
  return figures.get(`${scenario}|${target}|${metric}`);
}

async function step(name: string, fn: () => Promise<void>, minMs = 0): Promise<void> {
  if (timeLeft() < minMs) {
    const msg = `${name}: skipped, the time budget ran out`;
    notes.push(msg);
    log(msg);
    return;
  }
  try {
    await fn();
  } catch (e) {
    const msg = `${name}: ${(e as Error).stack ?? String(e)}`;
    errors.push(msg.split('\n').slice(0, 4).join(' | '));
    log(`ERROR ${msg}`);
  }
}

// ------------------------------------------------------------------ scenarios

async function baselines(run: number): Promise<void> {
  await step(`baseline ws echo (run ${run})`, async () => {
    const echo = new WsEcho();
    await echo.start();
    try {
      await echo.run(Math.min(2000, C.seq), 16); // warm-up
      recordSample('ws.seq', 'baseline', await echo.run(C.seq, 1));
      recordSample('ws.16', 'baseline', await echo.run(C.inflight, 16));
    } finally {
      await echo.stop();
    }
  });
  await step(`baseline sqlite (run ${run})`, async () => {
    recordSample('sqlite.1row', 'baseline', sqliteInserts(Math.max(2000, C.seq * 2), 1));
    recordSample('sqlite.100row', 'baseline', sqliteInserts(C.batchMsgs, 100));
  });
}

/** Scenarios 1-4 on a freshly started target. */
async function coreScenarios(t: QueueTarget, run: number): Promise<void> {
  const k = countsFor(t);
  try {
    await t.start();
    // Warm-up: JIT, connections, the queue's first page.
    {
      const q = await t.queue(`warm-${run}`);
      await drive(Math.min(500, k.seq), 16, (i) => q.push(makeBody(i)));
      await q.consume(Math.min(500, k.seq), 4);
      await q.drop();
    }
    await step(`${t.id} produce.seq`, async () => {
      const q = await t.queue(`seq-${run}`);
      recordSample('produce.seq', t.id, await drive(k.seq, 1, (i) => q.push(makeBody(i)), true));
      await q.drop();
    });
    await step(`${t.id} produce.16`, async () => {
      const q = await t.queue(`p16-${run}`);
      recordSample('produce.16', t.id, await drive(k.inflight, 16, (i) => q.push(makeBody(i)), true));
      await q.drop();
    });
    if (t.batch) {
      await step(`${t.id} produce.batch100`, async () => {
        const q = await t.queue(`b100-${run}`);
        const calls = Math.ceil(k.batchMsgs / 100);
        const s = await drive(calls, 1, (c) => q.pushBatch(Array.from({ length: 100 }, (_, j) => makeBody(c * 100 + j))));
        recordSample('produce.batch100', t.id, { rate: (calls * 100) / s.seconds, count: calls * 100, seconds: s.seconds });
        await q.drop();
      });
    }
    for (const consumers of [1, 16]) {
      await step(`${t.id} consume.${consumers}`, async () => {
        const q = await t.queue(`c${consumers}-${run}`);
        await q.preload(k.consume);
        recordSample(`consume.${consumers}`, t.id, await q.consume(k.consume, consumers));
        const left = await q.depth();
        if (left !== 0 && left !== -1) notes.push(`${t.id} consume.${consumers} run ${run}: ${left} message(s) left after consuming (expected 0)`);
        await q.drop();
      });
    }
  } finally {
    await t.stop();
  }
}

/** Scenario 5 (and 6's RSS): consume rate with D messages already queued, for each D. */
async function depthScenarios(t: QueueTarget): Promise<void> {
  const k = countsFor(t);
  try {
    await t.start();
    const q = await t.queue('depth');
    let have = 0;
    for (const d of k.depthLevels) {
      await step(`${t.id} consume.depth.${d}`, async () => {
        for (let run = 1; run <= RUNS; run++) {
          // Top up so the queue holds d + M when the run starts and d when it ends.
          const want = d + k.depthConsume;
          const t0 = now();
          if (want > have) await q.preload(want - have, have);
          const loadS = (now() - t0) / 1000;
          if (want > have) log(`  preloaded ${t.id} to ${want} (${(want - have).toLocaleString()} in ${loadS.toFixed(1)} s)`);
          have = want;
          recordSample(`consume.depth.${d}`, t.id, await q.consume(k.depthConsume, 16), `queue holds ${d.toLocaleString()} + ${k.depthConsume.toLocaleString()} at the start`);
          have -= k.depthConsume;
        }
        const pid = t.serverPid();
        const r = pid ? serverMemory(pid, t.processTree) : null;
        if (r) {
          record(`rss.depth.${d}`, t.id, 'rss', 'MB', r.rssMB, r.note ? { note: r.note } : {});
          record(`rss.depth.${d}`, t.id, 'peak', 'MB', r.hwmMB);
          log(`  ${t.id} RSS with ${d.toLocaleString()} queued: ${r.rssMB.toFixed(0)} MB (${r.note ?? `peak ${r.hwmMB.toFixed(0)} MB`})`);
        }
      }, 30_000);
    }
    if (t instanceof QuaysideTarget && t.dataDir) {
      record('disk.depth.max', t.id, 'size', 'MB', dirSizeMB(t.dataDir), { count: have });
    }
  } finally {
    if (t instanceof QuaysideTarget) t.keepData = true;
    await t.stop();
  }
}

/** Scenario 6's start times. */
async function startTimes(q: QuaysideTarget | null): Promise<void> {
  const reps = Math.max(RUNS, 3);
  await step('quayside startEmulator memory', async () => {
    const script = `
      const t0 = performance.now();
      const { startEmulator } = require(${JSON.stringify(path.join(BUILD, 'emulator', 'emulator.js'))});
      const t1 = performance.now();
      startEmulator({ memory: true, port: 0 }).then(async (e) => {
        const t2 = performance.now();
        const e2 = await startEmulator({ memory: true, port: 0 });
        const t3 = performance.now();
        await e2.close(); await e.close();
        process.stdout.write(JSON.stringify({ requireMs: t1 - t0, firstMs: t2 - t1, secondMs: t3 - t2 }) + '\\n');
      });`;
    for (let i = 0; i < reps; i++) {
      const p = startProc(process.execPath, ['-e', script]);
      const line = await p.waitForLine(/requireMs/, 30_000);
      await p.stop();
      const r = JSON.parse(line) as { requireMs: number; firstMs: number; secondMs: number };
      record('start.memory', 'quayside', 'first', 'ms', r.firstMs);
      record('start.memory', 'quayside', 'require', 'ms', r.requireMs);
      record('start.memory', 'quayside', 'warm', 'ms', r.secondMs);
      log(`  startEmulator({memory:true}): require ${r.requireMs.toFixed(0)} ms, first call ${r.firstMs.toFixed(1)} ms, second ${r.secondMs.toFixed(1)} ms`);
    }
  });
  await step('quayside start (empty data dir)', async () => {
    for (let i = 0; i < reps; i++) {
      const dir = makeTmpDir('start-empty');
      const s = await startCli({ dataDir: dir });
      await s.proc.stop();
      removeTmpDir(dir);
      record('start.cli.empty', 'quayside', 'ms', 'ms', s.startMs);
      log(`  quayside start on a new data dir: ${s.startMs.toFixed(0)} ms to listening`);
    }
  });
  if (q?.dataDir) {
    const dir = q.dataDir;
    await step('quayside start (deep data dir)', async () => {
      for (let i = 0; i < reps; i++) {
        const s = await startCli({ dataDir: dir });
        const r = rssOf(s.proc.pid);
        await s.proc.stop('SIGTERM', 15_000);
        record('start.cli.deep', 'quayside', 'ms', 'ms', s.startMs, { note: `data dir with ${C.depthLevels[C.depthLevels.length - 1].toLocaleString()} live messages` });
        if (r) record('start.cli.deep', 'quayside', 'rss', 'MB', r.rssMB);
        log(`  quayside start on the deep data dir: ${s.startMs.toFixed(0)} ms to listening`);
      }
    });
    removeTmpDir(dir);
  }
}

// ------------------------------------------------------------------ goals

function ratioRuns(a: Figure | undefined, b: Figure | undefined): number[] {
  if (!a || !b) return [];
  const n = Math.min(a.runs.length, b.runs.length);
  return Array.from({ length: n }, (_, i) => a.runs[i] / b.runs[i]);
}

function goals(): GoalCheck[] {
  const out: GoalCheck[] = [];
  const ratioGoal = (id: string, goal: string, a: Figure | undefined, b: Figure | undefined, min: number | null, max: number | null, note?: string) => {
    const runs = ratioRuns(a, b);
    const value = runs.length ? median(runs) : null;
    const met = value === null ? null : (min === null || value >= min) && (max === null || value <= max);
    out.push({ id, goal, value, runs, threshold: min !== null ? `≥ ${min}×` : `≤ ${max}×`, met, note });
  };
  const absGoal = (id: string, goal: string, f: Figure | undefined, max: number, unit: string, note?: string) => {
    const value = f ? f.median : null;
    out.push({ id, goal, value, runs: f?.runs ?? [], threshold: `≤ ${max} ${unit}`, met: value === null ? null : value <= max, note });
  };
  ratioGoal('p16-bullmq', 'produce, 16 in flight: Quayside / BullMQ in memory', fig('produce.16', 'quayside'), fig('produce.16', 'bullmq-mem'), 1.5, null);
  ratioGoal('p16-ws', 'produce, 16 in flight: Quayside / bare ws echo, 16 in flight', fig('produce.16', 'quayside'), fig('ws.16', 'baseline'), 0.5, null);
  ratioGoal('b100-bullmq', 'batches of 100: Quayside / BullMQ addBulk(100)', fig('produce.batch100', 'quayside'), fig('produce.batch100', 'bullmq-mem'), 4, null);
  ratioGoal('b100-sqlite', 'batches of 100: Quayside / bare SQLite, 100 rows per transaction', fig('produce.batch100', 'quayside'), fig('sqlite.100row', 'baseline'), 0.3, null);
  ratioGoal('c16-bullmq', 'consume+ack, 16 consumers: Quayside / BullMQ worker, concurrency 16', fig('consume.16', 'quayside'), fig('consume.16', 'bullmq-mem'), 3, null);
  ratioGoal('seq-p50', 'sequential push p50: Quayside / bare ws round trip p50', fig('produce.seq', 'quayside', 'p50'), fig('ws.seq', 'baseline', 'p50'), null, 2);
  ratioGoal('seq-p99', 'sequential push p99: Quayside / bare ws round trip p99', fig('produce.seq', 'quayside', 'p99'), fig('ws.seq', 'baseline', 'p99'), null, 3);
  ratioGoal('p16-azurite', 'produce, 16 in flight: Quayside / Azurite', fig('produce.16', 'quayside'), fig('produce.16', 'azurite'), 50, null);
  ratioGoal('c16-azurite', 'consume+ack, 16 consumers: Quayside / Azurite', fig('consume.16', 'quayside'), fig('consume.16', 'azurite'), 50, null);
  const levels = C.depthLevels;
  const lo = levels[0];
  const hi = levels[levels.length - 1];
  ratioGoal('depth', `consume rate with ${hi.toLocaleString()} queued / with ${lo.toLocaleString()} queued (Quayside)`, fig(`consume.depth.${hi}`, 'quayside'), fig(`consume.depth.${lo}`, 'quayside'), 0.8, null);
  absGoal('rss', `Quayside RSS with ${hi.toLocaleString()} queued`, fig(`rss.depth.${hi}`, 'quayside', 'rss'), 150, 'MB');
  absGoal('start-memory', 'startEmulator({ memory: true }) ready (first call in a fresh process)', fig('start.memory', 'quayside', 'first'), 150, 'ms');
  absGoal('start-cli', `\`quayside start\` on a data dir of ${hi.toLocaleString()} messages, spawn to listening`, fig('start.cli.deep', 'quayside', 'ms'), 1000, 'ms');
  return out;
}

// ------------------------------------------------------------------ output

function machine(loadAtStart: number[]): Results['machine'] {
  return {
    cpu: os.cpus()[0]?.model ?? 'unknown',
    cores: os.cpus().length,
    memoryGB: Math.round((os.totalmem() / 1024 ** 3) * 10) / 10,
    node: process.version,
    os: `${os.type()} ${os.release()} (${os.arch()})`,
    loadAtStart,
    loadAtEnd: os.loadavg().map((x) => Math.round(x * 100) / 100),
  };
}

function writeResults(loadAtStart: number[], partial: boolean): void {
  const res: Results = {
    kind: SMOKE ? 'smoke' : 'full',
    startedAt: new Date(T_START).toISOString(),
    finishedAt: new Date().toISOString(),
    seconds: Math.round((Date.now() - T_START) / 1000),
    machine: machine(loadAtStart),
    counts: { default: C, ...peerCountsThatRan(), runs: RUNS, partial },
    targets: targetInfos,
    figures: [...figures.values()],
    goals: goals(),
    unmeasured,
    notes,
    errors,
  };
  fs.mkdirSync(path.dirname(OUT_JSON), { recursive: true });
  fs.writeFileSync(OUT_JSON + '.tmp', JSON.stringify(res, null, 2) + '\n');
  fs.renameSync(OUT_JSON + '.tmp', OUT_JSON);
  fs.mkdirSync(path.dirname(OUT_MD), { recursive: true });
  fs.writeFileSync(OUT_MD, renderMarkdown(res));
}

// ------------------------------------------------------------------ main

async function main(): Promise<void> {
  const loadAtStart = os.loadavg().map((x) => Math.round(x * 100) / 100);
  let finished = false;
  const bail = (why: string, code: number) => {
    if (finished) return;
    finished = true;
    log(`${why}: stopping every process the bench started`);
    errors.push(why);
    killAllChildrenSync();
    try {
      writeResults(loadAtStart, true);
    } catch {
      /* nothing more to do */
    }
    process.exit(code);
  };
  process.on('SIGINT', () => bail('interrupted (SIGINT)', 130));
  process.on('SIGTERM', () => bail('terminated (SIGTERM)', 143));
  process.on('uncaughtException', (e) => bail(`uncaught: ${e.stack ?? e}`, 1));
  process.on('unhandledRejection', (e) => bail(`unhandled rejection: ${(e as Error)?.stack ?? e}`, 1));
  process.on('exit', () => killAllChildrenSync());
  // A hard stop a little past the budget, whatever is running.
  const hard = setTimeout(() => bail(`the bench ran past its budget of ${BUDGET_MS / 60_000} min`, 1), BUDGET_MS + 60_000);
  hard.unref();

  log(`${SMOKE ? 'smoke' : 'full'} run, budget ${BUDGET_MS / 60_000} min, ${RUNS} runs; machine ${os.cpus()[0]?.model} × ${os.cpus().length}, load ${loadAtStart.join(' ')}`);
  log('building the emulator from the working tree into bench/.build');
  buildQuayside();

  const want = (id: string) => (!ONLY || ONLY.includes(id)) && !SKIP.includes(id);
  const targets: QueueTarget[] = [];
  const add = (t: QueueTarget, unavailable: string | null) => {
    if (!want(t.id)) return;
    targetInfos.push({ id: t.id, label: t.label, durability: t.durability, versions: t.versions, consumeNote: t.consumeNote, ...(unavailable ? { skipped: unavailable } : {}) });
    if (unavailable) {
      notes.push(`${t.label}: skipped, ${unavailable}`);
      log(`${t.label}: skipped, ${unavailable}`);
    } else targets.push(t);
  };
  add(new QuaysideTarget(), null);
  add(new BullMQTarget('memory'), BullMQTarget.available());
  add(new BullMQTarget('aof-everysec'), BullMQTarget.available());
  add(new AzuriteTarget(), AzuriteTarget.available());
  add(new PgBossTarget('fsync'), PgBossTarget.available());
  add(new PgBossTarget('no-fsync'), PgBossTarget.available());

  for (let run = 1; run <= RUNS; run++) {
    log(`run ${run}: machine limits`);
    if (want('baseline')) await baselines(run);
    for (const t of targets) {
      log(`run ${run}: ${t.label}`);
      await step(`${t.id} core scenarios (run ${run})`, () => coreScenarios(t, run), 20_000);
    }
    writeResults(loadAtStart, true);
  }

  let deep: QuaysideTarget | null = null;
  for (const t of targets) {
    log(`depth: ${t.label}`);
    await step(`${t.id} depth scenarios`, () => depthScenarios(t), 60_000);
    if (t instanceof QuaysideTarget) deep = t;
    writeResults(loadAtStart, true);
  }

  if (want('quayside')) {
    log('start times');
    await startTimes(deep);
    log('scenario 7: Quayside faces');
    await step('quayside faces', () => runQuaysideFaces({ counts: C, runs: RUNS, smoke: SMOKE, record, recordSample, notes, unmeasured }), 20_000);
  }

  clearTimeout(hard);
  finished = true;
  writeResults(loadAtStart, false);
  if (liveChildren() > 0) log(`${liveChildren()} child process(es) still running; killing them`);
  killAllChildrenSync();
  await sleep(10);
  log(`wrote ${path.relative(ROOT, OUT_JSON)} and ${path.relative(ROOT, OUT_MD)} in ${((Date.now() - T_START) / 1000).toFixed(0)} s${errors.length ? `, with ${errors.length} error(s)` : ''}`);
  if (errors.length) {
    for (const e of errors) log(`  error: ${e}`);
    process.exitCode = 1;
  }
}

main().then(
  // Peers' clients (HTTP agents, Redis connections) can hold the event loop open: exit now.
  () => process.exit(process.exitCode ?? 0),
  (e) => {
    log(`bench failed: ${(e as Error).stack ?? e}`);
    killAllChildrenSync();
    process.exit(1);
  },
);
