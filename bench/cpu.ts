// `npx tsx bench/cpu.ts [produce16|batch100|consume16|seq|all] [--n N] [--repeat R] [--prof DIR]`
// CPU per message, the steadier measure on a shared 2-core machine where rates swing between
// runs: the emulator's user + system time from /proc/<pid>/stat and the bench client's own
// process.cpuUsage(), over N messages, each figure the median of R repeats. --prof DIR also
// writes the emulator's .cpuprofile there (node --cpu-prof).
import fs from 'node:fs';
import { argVal, drive, killAllChildrenSync, log, makeBody, median, type Sample } from './lib';
import { QuaysideTarget, buildQuayside } from './targets/quayside';

/** utime + stime of a process, in µs (clock ticks are 100 Hz on Linux x64). */
function procCpuUs(pid: number): number {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10_000;
}

async function measure(pid: number, n: number, run: () => Promise<Sample>): Promise<{ rate: number; serverUs: number; clientUs: number }> {
  const s0 = procCpuUs(pid);
  const c0 = process.cpuUsage();
  const sample = await run();
  const c = process.cpuUsage(c0);
  return { rate: sample.rate, serverUs: (procCpuUs(pid) - s0) / n, clientUs: (c.user + c.system) / n };
}

async function main(): Promise<void> {
  const which = process.argv[2] ?? 'all';
  const n = Number(argVal('--n') ?? 30_000);
  const repeat = Number(argVal('--repeat') ?? 3);
  const profDir = argVal('--prof');
  buildQuayside();
  const t = new QuaysideTarget(profDir ? { nodeArgs: ['--cpu-prof', '--cpu-prof-dir', profDir] } : {});
  await t.start();
  const pid = t.serverPid()!;
  try {
    const seqN = Math.min(n, 5000);
    // Each scenario prepares a fresh queue (not measured), then returns the measured run.
    const scenarios: Record<string, (k: number) => Promise<() => Promise<Sample>>> = {
      seq: async (k) => {
        const q = await t.queue(`s${k}`);
        return () => drive(seqN, 1, (i) => q.push(makeBody(i)));
      },
      produce16: async (k) => {
        const q = await t.queue(`p${k}`);
        return () => drive(n, 16, (i) => q.push(makeBody(i)));
      },
      batch100: async (k) => {
        const q = await t.queue(`b${k}`);
        return async () => {
          const s = await drive(Math.ceil(n / 100), 1, (c) => q.pushBatch(Array.from({ length: 100 }, (_, j) => makeBody(c * 100 + j))));
          return { ...s, rate: s.rate * 100 };
        };
      },
      consume16: async (k) => {
        const q = await t.queue(`c${k}`);
        await q.preload(n);
        return () => q.consume(n, 16);
      },
    };
    for (const [name, prepare] of Object.entries(scenarios)) {
      if (which !== 'all' && which !== name) continue;
      const count = name === 'seq' ? seqN : n;
      await (await prepare(100))(); // warm-up
      const rs = [];
      for (let k = 0; k < repeat; k++) rs.push(await measure(pid, count, await prepare(k)));
      log(
        `${name}: ${median(rs.map((r) => r.rate)).toFixed(0)} msgs/s; emulator ${median(rs.map((r) => r.serverUs)).toFixed(1)} µs, ` +
          `client ${median(rs.map((r) => r.clientUs)).toFixed(1)} µs per message (median of ${repeat}: ${rs.map((r) => r.rate.toFixed(0)).join(' / ')})`,
      );
    }
  } finally {
    await t.stop();
    killAllChildrenSync();
  }
}

main().catch((e) => {
  console.error(e);
  killAllChildrenSync();
  process.exit(1);
});
