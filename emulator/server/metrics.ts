import type { Engine } from '../engine/engine';

const esc = (s: string) => s.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"');

/** Per-queue gauges in the Prometheus text exposition format. */
export async function metricsText(engine: Engine): Promise<string> {
  const { queues } = await engine.listQueues({});
  const gauges: [string, string, (c: (typeof queues)[number]['counts']) => number][] = [
    ['quayside_queue_depth', 'Messages waiting (ready + delayed).', (c) => c.depth],
    ['quayside_queue_ready', 'Messages ready to be delivered.', (c) => c.ready],
    ['quayside_queue_delayed', 'Messages delayed until a later time.', (c) => c.delayed],
    ['quayside_queue_in_flight', 'Messages leased to a consumer.', (c) => c.leased],
    ['quayside_queue_dead', 'Dead-lettered messages (the failed area for env queues).', (c) => c.dead],
    ['quayside_queue_bytes', 'Bytes of live message bodies.', (c) => c.bytes],
    ['quayside_queue_oldest_ready_age_seconds', 'How long the oldest ready message has waited.', (c) => c.oldestReadyAgeMs / 1000],
  ];
  const lines: string[] = [];
  for (const [name, help, get] of gauges) {
    lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} gauge`);
    for (const q of queues) {
      lines.push(`${name}{namespace="${esc(q.namespace)}",queue="${esc(q.name)}",dialect="${q.dialect}"} ${get(q.counts)}`);
    }
  }
  lines.push('# HELP quayside_queues Queues known to the emulator.', '# TYPE quayside_queues gauge', `quayside_queues ${queues.length}`);
  return lines.join('\n') + '\n';
}
