// `npx tsx bench/profile.ts [produce16|seq|batch100|consume16|all] [--n N]`
// Runs one Quayside scenario against `quayside start` under `node --cpu-prof` and prints the
// functions with the most self time in the emulator process (the .cpuprofile is kept under
// bench/results/profiles/ for Chrome DevTools / speedscope).
import fs from 'node:fs';
import path from 'node:path';
import { argVal, drive, killAllChildrenSync, log, makeBody } from './lib';
import { QuaysideTarget, buildQuayside, startCli } from './targets/quayside';
import { removeTmpDir } from './lib';

interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
  children?: number[];
}

function summarize(file: string, top = 25): string {
  const prof = JSON.parse(fs.readFileSync(file, 'utf8')) as { nodes: Node[]; samples: number[]; timeDeltas: number[] };
  const self = new Map<string, number>();
  const byFile = new Map<string, number>();
  let total = 0;
  for (const n of prof.nodes) {
    const hits = n.hitCount ?? 0;
    total += hits;
    const url = n.callFrame.url.replace(/^file:\/\//, '').replace(/.*\/(bench\/\.build|node_modules)\//, '$1/');
    const k = `${n.callFrame.functionName || '(anonymous)'}  ${url}:${n.callFrame.lineNumber + 1}`;
    self.set(k, (self.get(k) ?? 0) + hits);
    const f = url ? (url.includes('node_modules/') ? url.split('/').slice(0, 2).join('/') : url) : n.callFrame.functionName;
    byFile.set(f, (byFile.get(f) ?? 0) + hits);
  }
  const pct = (x: number) => ((100 * x) / total).toFixed(1).padStart(5) + ' %';
  const lines = ['self time by function:'];
  for (const [k, v] of [...self].sort((a, b) => b[1] - a[1]).slice(0, top)) lines.push(`  ${pct(v)}  ${k}`);
  lines.push('', 'self time by file / package:');
  for (const [k, v] of [...byFile].sort((a, b) => b[1] - a[1]).slice(0, 15)) lines.push(`  ${pct(v)}  ${k}`);
  return lines.join('\n');
}

async function main(): Promise<void> {
  const which = process.argv[2] ?? 'all';
  const n = Number(argVal('--n') ?? 50_000);
  const dir = path.join(__dirname, 'results', 'profiles', `${which}-${new Date().toISOString().replace(/[:.]/g, '-')}`);
  fs.mkdirSync(dir, { recursive: true });
  buildQuayside();
  if (which === 'start-deep') {
    // Fill a data directory with n messages, then profile `quayside start` on it.
    const fill = new QuaysideTarget();
    fill.keepData = true;
    await fill.start();
    await (await fill.queue('deep')).preload(n);
    await fill.stop();
    const s = await startCli({ dataDir: fill.dataDir!, nodeArgs: ['--cpu-prof', '--cpu-prof-dir', dir] });
    log(`quayside start on ${n.toLocaleString()} messages: ${s.startMs.toFixed(0)} ms to listening`);
    await s.proc.stop('SIGTERM', 15_000);
    removeTmpDir(fill.dataDir!);
  } else {
  const t = new QuaysideTarget({ nodeArgs: ['--cpu-prof', '--cpu-prof-dir', dir] });
  await t.start();
  try {
    const q = await t.queue('profile');
    if (which === 'seq' || which === 'all') await drive(Math.min(n, 10_000), 1, (i) => q.push(makeBody(i)));
    if (which === 'produce16' || which === 'all') await drive(n, 16, (i) => q.push(makeBody(i)));
    if (which === 'batch100' || which === 'all') await drive(Math.ceil(n / 100) * 4, 1, (c) => q.pushBatch(Array.from({ length: 100 }, (_, j) => makeBody(c * 100 + j))));
    if (which === 'consume16' || which === 'all') {
      const have = await q.depth();
      if (have < n) await q.preload(n - have);
      const s = await q.consume(n, 16);
      log(`consume.16: ${s.rate.toFixed(0)} msgs/s`);
    }
  } finally {
    await t.stop();
  }
  }
  const files = fs.readdirSync(dir).filter((f) => f.endsWith('.cpuprofile'));
  for (const f of files) process.stdout.write(`${path.join(dir, f)}\n${summarize(path.join(dir, f))}\n`);
  killAllChildrenSync();
}

main().catch((e) => {
  console.error(e);
  killAllChildrenSync();
  process.exit(1);
});
