import { LIMITS, type ConsumerSettings, type Dialect, type QueuePolicy } from '../protocol';
import { invalid } from '../errors';
import { describe, str } from './validate';

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;
export const KB = 1024;

/** Each dialect's defaults (DESIGN.md "Per-dialect defaults"); every field can be overridden per queue. */
export const PRESETS: Record<Dialect, QueuePolicy> = {
  cache: {
    leaseMs: 30 * SECOND,
    maxDeliveries: 5,
    deadRetentionMs: 14 * DAY,
    maxMessageAgeMs: null,
    onMaxAge: 'dead',
    dedupeTtlMs: HOUR,
    maxPayloadBytes: 256 * KB,
    maxDepth: null,
    maxBytes: null,
    maxNackDelayMs: 12 * HOUR,
    // The seed sets no bound on delaySeconds: a week covers "remind them tomorrow" and is well
    // inside the 14 days a dead letter is kept.
    maxDelayMs: 7 * DAY,
    reasons: { timeout: 'timeout', nack: 'nack', expired: 'expired' },
    recordNackReason: false,
  },
  env: {
    leaseMs: 30 * SECOND,
    maxDeliveries: 4, // maxRetries 3
    deadRetentionMs: 14 * DAY,
    maxMessageAgeMs: 14 * DAY, // the queue's retention: older messages are dropped
    onMaxAge: 'drop',
    dedupeTtlMs: HOUR,
    maxPayloadBytes: 128 * KB,
    maxDepth: null,
    maxBytes: null,
    maxNackDelayMs: 12 * HOUR,
    maxDelayMs: 12 * HOUR,
    reasons: { timeout: 'timeout', nack: 'retry', expired: 'expired' },
    recordNackReason: false,
  },
  sync: {
    leaseMs: 30 * SECOND,
    maxDeliveries: 10,
    deadRetentionMs: 7 * DAY,
    maxMessageAgeMs: 7 * DAY,
    onMaxAge: 'dead',
    dedupeTtlMs: 7 * DAY,
    maxPayloadBytes: 131072,
    maxDepth: null,
    maxBytes: null,
    maxNackDelayMs: 7 * DAY,
    maxDelayMs: 7 * DAY,
    reasons: { timeout: 'max_deliveries_exceeded', nack: 'max_deliveries_exceeded', expired: 'expired' },
    recordNackReason: true,
  },
};

/** env push-consumer defaults. visibilityMs: the queue's own (`leaseMs`, 30 s unless the queue set it). */
export const CONSUMER_DEFAULTS: Omit<ConsumerSettings, 'appId' | 'visibilityMs'> = {
  maxBatchSize: 10,
  maxBatchTimeoutMs: 5000,
  maxConcurrency: 1,
};

const POSITIVE_MS: (keyof QueuePolicy)[] = ['leaseMs', 'deadRetentionMs', 'dedupeTtlMs', 'maxNackDelayMs', 'maxDelayMs'];
const NULLABLE_POSITIVE: (keyof QueuePolicy)[] = ['maxMessageAgeMs', 'maxDepth', 'maxBytes'];

/** Applies a partial override to a policy, refusing anything out of range. */
export function mergePolicy(base: QueuePolicy, patch: unknown): QueuePolicy {
  if (patch === undefined || patch === null) return base;
  if (typeof patch !== 'object' || Array.isArray(patch)) throw invalid('policy must be an object');
  const p = patch as Record<string, unknown>;
  const out: QueuePolicy = { ...base, reasons: { ...base.reasons } };
  for (const [k, v] of Object.entries(p)) {
    if (v === undefined) continue;
    if ((POSITIVE_MS as string[]).includes(k) || k === 'maxDeliveries' || k === 'maxPayloadBytes') {
      if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 1) throw invalid(`policy.${k} must be a positive integer, got ${describe(v)}`);
      // A message must fit in one protocol frame, so that what an in-process queue accepts a client can send.
      if (k === 'maxPayloadBytes' && v > LIMITS.maxMessageBytes) throw invalid(`policy.maxPayloadBytes is at most ${LIMITS.maxMessageBytes} bytes (4 MiB), got ${v}`);
      // A queue's default lease within what a pull, an extend and every face may ask for (12 hours).
      // Checked when it changes: a queue made before the cap can still be sent its own policy back.
      if (k === 'leaseMs' && v > 12 * HOUR && v !== base.leaseMs) throw invalid(`policy.leaseMs is at most ${12 * HOUR} ms (12 hours), got ${v}`);
      (out as unknown as Record<string, unknown>)[k] = v;
    } else if ((NULLABLE_POSITIVE as string[]).includes(k)) {
      if (v !== null && (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 1)) throw invalid(`policy.${k} must be a positive integer or null, got ${describe(v)}`);
      (out as unknown as Record<string, unknown>)[k] = v;
    } else if (k === 'recordNackReason') {
      if (typeof v !== 'boolean') throw invalid('policy.recordNackReason must be true or false');
      out.recordNackReason = v;
    } else if (k === 'onMaxAge') {
      if (v !== 'dead' && v !== 'drop') throw invalid(`policy.onMaxAge must be "dead" or "drop"`);
      out.onMaxAge = v;
    } else if (k === 'reasons') {
      if (typeof v !== 'object' || v === null) throw invalid('policy.reasons must be an object');
      for (const [rk, rv] of Object.entries(v as Record<string, unknown>)) {
        if (!['timeout', 'nack', 'expired'].includes(rk) || typeof rv !== 'string' || !rv) throw invalid(`policy.reasons.${rk} is not a valid reason`);
        out.reasons[rk as 'timeout'] = rv;
      }
    } else {
      throw invalid(`unknown policy field "${k}"`);
    }
  }
  return out;
}

/**
 * A consumer's settings as set: the defaults plus what is given. Setting a consumer replaces the
 * previous settings (as PUT does and as the console would), so a setting left out is the default.
 * The lease defaults to the queue's (`leaseMs`, which its `visibilityMs` sets), read at this moment.
 */
export function consumerSettings(patch: Record<string, unknown>, queueLeaseMs: number): ConsumerSettings {
  // Kept and compared as it is, so it must be text SQLite stores unchanged (no lone surrogate).
  const appId = str(patch.appId, 'consumer.appId', 200);
  const out: ConsumerSettings = { ...CONSUMER_DEFAULTS, visibilityMs: queueLeaseMs, appId };
  const ranges: Record<string, [number, number]> = {
    maxBatchSize: [1, 100],
    maxBatchTimeoutMs: [0, 60_000],
    maxConcurrency: [1, 250],
    visibilityMs: [1, 12 * HOUR],
  };
  for (const [k, [lo, hi]] of Object.entries(ranges)) {
    const v = patch[k];
    if (v === undefined) continue;
    if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < lo || v > hi) throw invalid(`consumer.${k} must be an integer from ${lo} to ${hi}, got ${describe(v)}`);
    (out as unknown as Record<string, number>)[k] = v;
  }
  for (const k of Object.keys(patch)) if (k !== 'appId' && !Object.hasOwn(ranges, k)) throw invalid(`unknown consumer field "${k}"`);
  return out;
}

export const TIME = { SECOND, MINUTE, HOUR, DAY };
