// Soak run (issue 5): mixed load (pushes, batches, pulls, acks, batch acks, nacks, dead letters,
// replays) over WebSocket against the built emulator on a data directory for a while, sampling its
// RSS once a second; then kill -9 and the same checks as scripts/crash-test.ts (nothing answered
// is lost, nothing duplicated, counters and integrity_check ok). RSS must stay flat: after a
// warm-up, the last quarter's median may not exceed the second quarter's by more than 32 MiB.
//
//   npx tsx scripts/soak.ts [--minutes 10] [--out file.json]

import fs from 'node:fs';
import { crashOk, formatFigures, runCrashTest, type CrashFigures } from './crash-test';

export interface SoakFigures extends CrashFigures {
  rssStartMb: number;
  rssQ2Mb: number;
  rssQ4Mb: number;
  rssMaxMb: number;
  rssGrowthMb: number;
  rssFlat: boolean;
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.floor(s.length / 2)] : NaN;
};

export async function runSoak(opts: { ms: number; log?: (l: string) => void }): Promise<SoakFigures> {
  const x = await runCrashTest({ kills: 0, soakMs: opts.ms, producers: 3, consumers: 3, producerPauseMs: 2, log: opts.log });
  const rss = x.rssKb ?? [];
  const q = Math.max(1, Math.floor(rss.length / 4));
  const q2 = median(rss.slice(q, 2 * q)) / 1024;
  const q4 = median(rss.slice(rss.length - q)) / 1024;
  const growth = q4 - q2;
  const out: SoakFigures = {
    ...x,
    rssStartMb: Math.round(rss[0] / 1024),
    rssQ2Mb: Math.round(q2),
    rssQ4Mb: Math.round(q4),
    rssMaxMb: Math.round(Math.max(...rss) / 1024),
    rssGrowthMb: Math.round(growth * 10) / 10,
    rssFlat: growth < 32,
  };
  if (!out.rssFlat) out.failures.push(`RSS grew by ${out.rssGrowthMb} MiB from the second quarter to the last`);
  return out;
}

export function formatSoak(x: SoakFigures): string {
  return `soak ${x.seconds} s: RSS start ${x.rssStartMb} MiB, 2nd-quarter median ${x.rssQ2Mb} MiB, last-quarter median ${x.rssQ4Mb} MiB, max ${x.rssMaxMb} MiB (growth ${x.rssGrowthMb} MiB)\n` + formatFigures(x);
}

if (require.main === module) {
  const argv = process.argv.slice(2);
  const i = argv.indexOf('--minutes');
  const minutes = i >= 0 ? Number(argv[i + 1]) : 10;
  const outI = argv.indexOf('--out');
  runSoak({ ms: minutes * 60_000, log: (l) => console.log(l) })
    .then((x) => {
      console.log(formatSoak(x));
      if (outI >= 0) fs.writeFileSync(argv[outI + 1], JSON.stringify({ ...x, rssKb: undefined }, null, 2) + '\n');
      process.exit(crashOk(x) ? 0 : 1);
    })
    .catch((e) => {
      console.error(e);
      process.exit(1);
    });
}
