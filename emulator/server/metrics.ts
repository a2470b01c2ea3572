import type { Engine } from '../engine/engine';
import { isCode } from '../errors';
import type { LagStep } from '../protocol';

const esc = (s: string) => s.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"');

type Counts = Awaited<ReturnType<Engine['listQueues']>>['queues'][number]['counts'];

const GAUGES: [string, string, (c: Counts) => number][] = [
  ['quayside_queue_depth', 'Messages waiting (ready + delayed).', (c) => c.depth],
  ['quayside_queue_ready', 'Messages ready to be delivered.', (c) => c.ready],
  ['quayside_queue_delayed', 'Messages delayed until a later time.', (c) => c.delayed],
  ['quayside_queue_in_flight', 'Messages leased to a consumer.', (c) => c.leased],
  ['quayside_queue_dead', 'Dead-lettered messages (the failed area for env queues).', (c) => c.dead],
  ['quayside_queue_bytes', 'Bytes of live message bodies.', (c) => c.bytes],
  ['quayside_queue_oldest_ready_age_seconds', 'How long the oldest ready message has waited.', (c) => c.oldestReadyAgeMs / 1000],
];

/**
 * The 24-hour history (DESIGN "Metrics"), one series per half-hour step: a `step` label holds the
 * step's start (UTC, ISO 8601). A scrape is one moment, so the steps are labels, not timestamps.
 */
const HISTORY: [string, string, (s: LagStep) => number][] = [
  ['quayside_queue_lag_peak_depth', 'Peak depth in the half-hour step starting at `step` (last 24 hours).', (s) => s.peakDepth],
  ['quayside_queue_lag_max_wait_seconds', 'Longest wait of the oldest ready message in the half-hour step starting at `step`.', (s) => s.maxWaitMs / 1000],
];

/** Per-queue gauges and their lag history in the Prometheus text exposition format. */
export async function metricsText(engine: Engine): Promise<string> {
  const { queues } = await engine.listQueues({});
  const labels = (q: (typeof queues)[number]) => `namespace="${esc(q.namespace)}",queue="${esc(q.name)}",dialect="${q.dialect}"`;
  const lines: string[] = [];
  for (const [name, help, get] of GAUGES) {
    lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} gauge`);
    for (const q of queues) lines.push(`${name}{${labels(q)}} ${get(q.counts)}`);
  }
  const histories: [(typeof queues)[number], LagStep[]][] = [];
  for (const q of queues) {
    try {
      histories.push([q, (await engine.stats({ namespace: q.namespace, queue: q.name })).lagHistory]);
    } catch (e) {
      if (!isCode(e, 'not_found')) throw e; // deleted since it was listed
    }
  }
  for (const [name, help, get] of HISTORY) {
    lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} gauge`);
    for (const [q, steps] of histories) {
      for (const s of steps) lines.push(`${name}{${labels(q)},step="${new Date(s.start).toISOString()}"} ${get(s)}`);
    }
  }
  lines.push('# HELP quayside_queues Queues known to the emulator.', '# TYPE quayside_queues gauge', `quayside_queues ${queues.length}`);
  return lines.join('\n') + '\n';
}
