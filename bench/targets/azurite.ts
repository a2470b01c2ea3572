// Azurite's queue service (on disk, its default) with @azure/storage-queue, started by the bench
// on a free 127.0.0.1 port.
import path from 'node:path';
import { DEPS, consumeLoops, depRequire, depVersion, drive, freePort, makeBody, makeTmpDir, removeTmpDir, startProc, type Proc, type Sample } from '../lib';
import type { QueueClient, QueueTarget } from './types';

/* eslint-disable @typescript-eslint/no-explicit-any */
// Azurite's documented development account; not a secret.
const ACCOUNT = 'devstoreaccount1';
const KEY = 'Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==';

export class AzuriteTarget implements QueueTarget {
  readonly id = 'azurite';
  readonly label = 'Azurite queue (on disk)';
  readonly durability = 'on disk: LokiJS metadata autosaved to a file, message bodies in extent files';
  readonly versions: Record<string, string> = { azurite: depVersion('azurite') ?? '?', '@azure/storage-queue': depVersion('@azure/storage-queue') ?? '?' };
  readonly batch = false;
  readonly consumeNote = 'receiveMessages(10) then deleteMessage for each (no batch delete)';
  private proc: Proc | null = null;
  private dir: string | null = null;
  private service: any = null;

  static available(): string | null {
    if (!depVersion('azurite') || !depVersion('@azure/storage-queue')) return 'azurite/@azure/storage-queue not installed in .bench-deps (run bench/setup.sh)';
    return null;
  }

  async start(): Promise<void> {
    const port = await freePort();
    this.dir = makeTmpDir('azurite');
    const main = path.join(DEPS, 'node_modules', 'azurite', 'dist', 'src', 'queue', 'main.js');
    this.proc = startProc(process.execPath, [
      main, '--queueHost', '127.0.0.1', '--queuePort', String(port), '--location', this.dir,
      '--silent', '--skipApiVersionCheck', '--loose', '--disableTelemetry',
    ], { cwd: this.dir });
    await this.proc.waitForLine(/successfully listen/i, 30_000);
    const { QueueServiceClient } = depRequire('@azure/storage-queue');
    this.service = QueueServiceClient.fromConnectionString(
      `DefaultEndpointsProtocol=http;AccountName=${ACCOUNT};AccountKey=${KEY};QueueEndpoint=http://127.0.0.1:${port}/${ACCOUNT};`,
    );
  }

  async queue(name: string, fresh = true): Promise<QueueClient> {
    // Azure queue names: lower case letters, digits and dashes, 3-63 characters.
    const safe = name.toLowerCase().replace(/[^a-z0-9-]/g, '-').replace(/-+/g, '-').slice(0, 63);
    const q = this.service.getQueueClient(safe);
    if (fresh) await q.deleteIfExists();
    await q.createIfNotExists();
    return new AzuriteQueue(q);
  }

  serverPid(): number | null {
    return this.proc?.pid ?? null;
  }

  async stop(): Promise<void> {
    this.service = null;
    await this.proc?.stop('SIGTERM', 10_000);
    this.proc = null;
    if (this.dir) removeTmpDir(this.dir);
    this.dir = null;
  }
}

class AzuriteQueue implements QueueClient {
  constructor(private readonly q: any) {}

  async push(body: unknown): Promise<void> {
    await this.q.sendMessage(JSON.stringify(body));
  }

  async pushBatch(): Promise<void> {
    throw new Error('Azure queues have no batch send');
  }

  async preload(n: number, from = 0): Promise<void> {
    await drive(n, 16, (i) => this.push(makeBody(from + i)));
  }

  async consume(n: number, consumers: number): Promise<Sample> {
    type Item = { messageId: string; popReceipt: string; messageText: string };
    return consumeLoops(
      'azurite',
      n,
      consumers,
      async (max) => {
        const r = await this.q.receiveMessages({ numberOfMessages: max, visibilityTimeout: 30 });
        const items = r.receivedMessageItems as Item[];
        for (const m of items) JSON.parse(m.messageText);
        return items;
      },
      (items) => Promise.all(items.map((m) => this.q.deleteMessage(m.messageId, m.popReceipt))),
    );
  }

  async depth(): Promise<number> {
    const p = await this.q.getProperties();
    return p.approximateMessagesCount ?? -1;
  }

  async drop(): Promise<void> {
    await this.q.deleteIfExists().catch(() => {});
  }
}
