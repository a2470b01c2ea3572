import { Connection } from './connection';
import type { Transport } from './transport';
import { syncQueueOver, type SyncQueue, type SyncQueueOptions } from './sync-face';

// quayside/sync: the `sync` dialect against a running emulator (QUAYSIDE_URL / QUAYSIDE_TOKEN).

export * from './sync-face';
export { QuaysideError } from '../errors';

export interface SyncConnectOptions extends SyncQueueOptions {
  /** `ws://host:port`; defaults to `QUAYSIDE_URL`, then `ws://127.0.0.1:7433`. */
  url?: string;
  /** Defaults to `QUAYSIDE_TOKEN`. */
  token?: string;
  /** Use this transport instead of opening a connection (it is not closed by `close()`). */
  transport?: Transport;
}

/**
 * A handle on the sync queue `id` of tenant `tenantId` (default 'default'). Nothing is sent until
 * the first call; the queue is created then (sync preset plus `limits` / `delivery`) if missing.
 */
export function queue(opts: SyncConnectOptions): SyncQueue {
  if (opts?.transport) return syncQueueOver(opts.transport, opts, false);
  const conn = new Connection({ url: opts?.url, token: opts?.token, client: 'quayside-sync' });
  return syncQueueOver(conn, opts, true);
}
