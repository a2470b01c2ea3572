import { LIMITS, type QueuePolicy } from '../protocol';
import { invalidArg, optCount, optMs, optObject, optSeconds } from './common';

// How each product's queue settings map onto the engine's QueuePolicy. Shared by the faces and
// by workspace-config.ts, so a quayside.json and a client configure a queue the same way.

/** The sync product's default key prefix. Its queues are the engine namespace `tenantId` itself. */
export const DEFAULT_PREFIX = 'sync:queue';

/** The engine namespace of a sync tenant's queues: another prefix is another set of queues, as another key prefix is. */
export function syncNamespace(prefix: string, tenant: string): string {
  if (prefix === DEFAULT_PREFIX) return tenant;
  const ns = `${prefix}:${tenant}`;
  if (ns.length > LIMITS.maxNameChars) {
    throw invalidArg(`prefix and tenantId must be at most ${LIMITS.maxNameChars - 1} characters together, got ${ns.length - 1}`, { field: 'prefix' });
  }
  return ns;
}

const DAY_MS = 24 * 3600 * 1000;
const YEAR_MS = 365 * DAY_MS;

/**
 * `sync`: the settings in `delivery` and `limits` of `queue({ ... })`. The seed does not say which
 * object holds which, so each takes any of them (a key given in both must agree), as its types say.
 */
export interface SyncSettings {
  /** Deliveries before a message goes to the DLQ (default 10). Usually in `delivery`. */
  maxDeliveries?: number;
  /** Lease of a `recv` without its own `leaseMs` (default 30 s). Usually in `delivery`. */
  defaultLeaseMs?: number;
  /** Bytes of the JSON envelope (data + meta) at most (default 131072). */
  payloadBytes?: number;
  /** Messages older than this go to the DLQ with reason `expired` (default 7 days). */
  maxMessageAgeMs?: number;
  /** How long the DLQ keeps a message (default 7 days). */
  dlqRetentionMs?: number;
  /** Default idempotency window of `send({ idempotencyKey })` (default 7 days). */
  idempotencyTtlMs?: number;
  /** Largest `nack({ delayMs })` accepted (default 7 days); a larger one throws and settles nothing. */
  maxNackDelayMs?: number;
  /** Accepted, not enforced (as at the top level); a partitioned mode throws. */
  ordering?: unknown;
}

export type SyncDelivery = SyncSettings;
export type SyncLimits = SyncSettings;

export const SYNC_DELIVERY_KEYS = ['maxDeliveries', 'defaultLeaseMs'] as const;
export const SYNC_LIMIT_KEYS = ['payloadBytes', 'maxMessageAgeMs', 'dlqRetentionMs', 'idempotencyTtlMs', 'maxNackDelayMs'] as const;
const SYNC_KEYS: readonly string[] = [...SYNC_DELIVERY_KEYS, ...SYNC_LIMIT_KEYS];

/**
 * The policy overrides a sync queue's `limits` and `delivery` ask for. Each key is accepted in
 * either object (the seed does not say which holds which); unknown keys and bad numbers throw.
 */
export function syncPolicy(limits: unknown, delivery: unknown): Partial<QueuePolicy> {
  const merged: Record<string, unknown> = {};
  for (const [what, o] of [['limits', optObject(limits, 'limits')], ['delivery', optObject(delivery, 'delivery')]] as const) {
    if (!o) continue;
    for (const [k, v] of Object.entries(o)) {
      // Ordering may sit in either object too: a partitioned mode throws wherever it is asked for.
      if (k === 'ordering') {
        checkOrdering(v);
        continue;
      }
      if (!SYNC_KEYS.includes(k)) throw invalidArg(`unknown ${what} option "${k}"; expected one of ${SYNC_KEYS.join(', ')}`, { field: k });
      if (v === undefined) continue;
      // Either place is accepted; two different values would leave one quietly unused.
      if (k in merged && merged[k] !== v) throw invalidArg(`${k} is given in both limits (${String(merged[k])}) and delivery (${String(v)}); give it once`, { field: k });
      merged[k] = v;
    }
  }
  const p: Partial<QueuePolicy> = {};
  const maxDeliveries = optCount(merged.maxDeliveries, 'maxDeliveries', 1, 1_000_000);
  if (maxDeliveries !== undefined) p.maxDeliveries = maxDeliveries;
  const lease = optMs(merged.defaultLeaseMs, 'defaultLeaseMs', { min: 1, max: 12 * 3600 * 1000 });
  if (lease !== undefined) p.leaseMs = lease;
  const payload = optCount(merged.payloadBytes, 'payloadBytes', 1, LIMITS.maxMessageBytes);
  if (payload !== undefined) p.maxPayloadBytes = payload;
  const age = optMs(merged.maxMessageAgeMs, 'maxMessageAgeMs', { min: 1, max: 10 * YEAR_MS });
  if (age !== undefined) p.maxMessageAgeMs = age;
  const dlq = optMs(merged.dlqRetentionMs, 'dlqRetentionMs', { min: 1, max: 10 * YEAR_MS });
  if (dlq !== undefined) p.deadRetentionMs = dlq;
  const ttl = optMs(merged.idempotencyTtlMs, 'idempotencyTtlMs', { min: 1, max: YEAR_MS });
  if (ttl !== undefined) p.dedupeTtlMs = ttl;
  const nack = optMs(merged.maxNackDelayMs, 'maxNackDelayMs', { min: 1, max: 10 * YEAR_MS });
  if (nack !== undefined) {
    p.maxNackDelayMs = nack;
    // A delayed send may wait as long as a nack may.
    p.maxDelayMs = Math.max(nack, 7 * DAY_MS);
  }
  return p;
}

/**
 * `ordering` is accepted and stored as metadata only (seed: "accepted but not enforced"); asking
 * for a partitioned mode, which would need enforcement, throws.
 */
export function checkOrdering(ordering: unknown): void {
  if (ordering === undefined || ordering === null || ordering === false) return;
  if (typeof ordering !== 'string' && (typeof ordering !== 'object' || Array.isArray(ordering))) {
    throw invalidArg(`ordering must be a string or { mode }, got ${Array.isArray(ordering) ? 'an array' : JSON.stringify(ordering) ?? typeof ordering}`, { field: 'ordering' });
  }
  const mode = typeof ordering === 'string' ? ordering : typeof ordering === 'object' ? (ordering as Record<string, unknown>).mode : undefined;
  // Any key that speaks of partitions ({ partitions: 4 }, { partitioned: true }, { partitionKey }) asks for it too.
  const partitionKey = typeof ordering === 'object' ? Object.entries(ordering as Record<string, unknown>).find(([k, v]) => /partition/i.test(k) && v !== undefined && v !== false && v !== null)?.[0] : undefined;
  const notEnforced = 'ordering is accepted but not enforced (orderingKey is stored as metadata only)';
  if (typeof mode === 'string' && /partition/i.test(mode)) {
    throw invalidArg(`ordering mode ${JSON.stringify(mode)} is not supported: ${notEnforced}`, { field: 'ordering' });
  }
  // Name what asked for partitions: with { mode: 'best_effort', partitions: 4 } the mode is fine.
  if (partitionKey !== undefined) throw invalidArg(`ordering.${partitionKey} is not supported: partitioned ordering would need enforcement, and ${notEnforced}`, { field: `ordering.${partitionKey}` });
  if (mode !== undefined && typeof mode !== 'string') throw invalidArg('ordering.mode must be a string');
}

/** `cache`: settings a quayside.json may give a cache queue. */
export interface CacheQueueSettings {
  visibilitySeconds?: number;
  maxDeliveries?: number;
  deadRetentionSeconds?: number;
  dedupeSeconds?: number;
  maxPayloadBytes?: number;
}

export const CACHE_SETTING_KEYS = ['visibilitySeconds', 'maxDeliveries', 'deadRetentionSeconds', 'dedupeSeconds', 'maxPayloadBytes'] as const;

export function cachePolicy(s: CacheQueueSettings): Partial<QueuePolicy> {
  const p: Partial<QueuePolicy> = {};
  const vis = optSeconds(s.visibilitySeconds, 'visibilitySeconds', { min: 0.001, max: 12 * 3600 });
  if (vis !== undefined) p.leaseMs = vis;
  const md = optCount(s.maxDeliveries, 'maxDeliveries', 1, 1_000_000);
  if (md !== undefined) p.maxDeliveries = md;
  const dr = optSeconds(s.deadRetentionSeconds, 'deadRetentionSeconds', { min: 1, max: 10 * 365 * 24 * 3600 });
  if (dr !== undefined) p.deadRetentionMs = dr;
  const dd = optSeconds(s.dedupeSeconds, 'dedupeSeconds', { min: 1, max: 365 * 24 * 3600 });
  if (dd !== undefined) p.dedupeTtlMs = dd;
  const pb = optCount(s.maxPayloadBytes, 'maxPayloadBytes', 1, LIMITS.maxMessageBytes);
  if (pb !== undefined) p.maxPayloadBytes = pb;
  return p;
}
