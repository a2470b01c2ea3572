import { Connection } from './connection';
import { checkConnectionOptions, type Transport } from './transport';
import { optTransport } from './common';
import { HandleTransport } from './handle-transport';
import { syncQueueOver, type SentData, type SyncQueue, type SyncQueueOptions, type Unnamed } from './sync-face';

// quayside/sync: the `sync` dialect against a running emulator (QUAYSIDE_URL / QUAYSIDE_TOKEN).

export * from './sync-face';
export { QuaysideError } from '../errors';

export interface SyncConnectOptions<T = unknown, In = T> extends SyncQueueOptions<T, In> {
  /** `ws://host:port`; defaults to `QUAYSIDE_URL`, then `ws://127.0.0.1:7433`. */
  url?: string;
  /** Defaults to `QUAYSIDE_TOKEN`. */
  token?: string;
  /** Use this transport instead of opening a connection (`close()` ends this handle's calls on it, not the transport). */
  transport?: Transport;
}

/**
 * A handle on the sync queue `id` of tenant `tenantId` (default 'default'). Nothing is sent until
 * the first call; the queue is created then (sync preset plus `limits` / `delivery`) if missing.
 */
export function queue<T = unknown, In = Unnamed>(opts: SyncConnectOptions<T, In>): SyncQueue<T, SentData<T, In>> {
  // The handle's own view of a shared transport, so its close() ends its own recv and streams.
  // Checked even beside a transport that makes them unused, as quayside/sync/memory checks them.
  checkConnectionOptions(opts);
  const given = optTransport(opts?.transport);
  if (given) return syncQueueOver(new HandleTransport(given), opts, true, CONNECT_KEYS);
  const conn = new Connection({ url: opts?.url, token: opts?.token, client: 'quayside-sync' });
  return syncQueueOver(conn, opts, true, CONNECT_KEYS);
}

/** What this entry point reads itself; `memory` belongs to quayside/sync/memory and is refused here. */
const CONNECT_KEYS = ['url', 'token', 'transport'];
