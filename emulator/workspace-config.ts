import fs from 'node:fs';
import { SYSTEM_ACTOR, type Engine } from './engine/engine';
import { PRESETS, consumerSettings } from './engine/presets';
import * as v from './engine/validate';
import { QuaysideError } from './errors';
import type { ConsumerSettings, Dialect, QueuePolicy } from './protocol';
import { ENV_SETTING_KEYS, envNamespace, envPolicy } from './http/env-naming';
import { onlyKeys, invalidArg } from './clients/common';
import { CACHE_SETTING_KEYS, DEFAULT_PREFIX, cachePolicy, checkOrdering, syncNamespace, syncPolicy } from './clients/policies';

// quayside.json: queues declared per dialect, created or updated idempotently when the emulator
// starts (docs/dialects.md "quayside.json"). Applying the same file twice changes nothing; a queue
// the file no longer names is left alone.
//
// {
//   "cache": [{ "namespace": "app", "name": "emails", "visibilitySeconds": 60 }],
//   "env":   [{ "project": "shop", "environment": "dev", "slug": "orders", "maxRetries": 5,
//               "consumer": { "appId": "worker", "maxBatchSize": 20 } }],
//   "sync":  [{ "tenantId": "default", "id": "jobs", "delivery": { "maxDeliveries": 3 } }]
// }

export interface WorkspaceConfig {
  $schema?: string;
  cache?: ({ namespace: string; name: string } & Record<string, unknown>)[];
  env?: ({ project: string; environment: string; slug: string; consumer?: Record<string, unknown> | null } & Record<string, unknown>)[];
  sync?: { tenantId?: string; prefix?: string; id: string; limits?: Record<string, unknown>; delivery?: Record<string, unknown>; ordering?: unknown }[];
}

export interface AppliedQueue {
  dialect: Dialect;
  namespace: string;
  queue: string;
  action: 'created' | 'updated' | 'unchanged';
}

export interface Planned {
  /** The entry it came from (`env[1]`), which errors name. */
  where: string;
  dialect: Dialect;
  namespace: string;
  queue: string;
  policy: QueuePolicy;
  /** undefined: leave the consumer as it is; null: a pull queue; else set it. */
  consumer?: Record<string, unknown> | null;
}

/**
 * Checks a parsed quayside.json and turns it into queues to ensure. Throws on the first problem,
 * naming it (and the file, `source`, when it came from one). Everything the engine would refuse
 * is found here, so a start never applies half of a file.
 */
export function planWorkspaceConfig(config: unknown, source?: string): Planned[] {
  /**
   * Runs `fn` for one part of the config, given where that part is (`quayside.json: env[1]`), and
   * names that place in any error it throws. `entry` undefined: the file as a whole.
   */
  const at = <T>(entry: string | undefined, fn: (where: string) => T): T => {
    const where = [source, entry].filter(Boolean).join(': ');
    try {
      return fn(where);
    } catch (e) {
      throw where && e instanceof QuaysideError ? new QuaysideError(e.code, `${where}: ${e.message}`, { details: e.details }) : e;
    }
  };
  const c = at(undefined, () => {
    if (typeof config !== 'object' || config === null || Array.isArray(config)) throw invalidArg('the config must be a JSON object with "cache", "env" and/or "sync" arrays');
    onlyKeys(config as Record<string, unknown>, ['$schema', 'cache', 'env', 'sync'], 'top-level');
    return config as Record<string, unknown>;
  });
  const out: Planned[] = [];
  const seen = new Set<string>();
  const list = (k: string): Record<string, unknown>[] => at(undefined, () => {
    const v = c[k];
    if (v === undefined) return [];
    if (!Array.isArray(v)) throw invalidArg(`"${k}" must be an array of queues`);
    return v.map((x, i) => {
      if (typeof x !== 'object' || x === null || Array.isArray(x)) throw invalidArg(`${k}[${i}] must be an object`);
      return x as Record<string, unknown>;
    });
  });
  const add = (p: Planned) => {
    const key = `${p.namespace}\u0000${p.queue}`;
    if (seen.has(key)) throw invalidArg(`queue "${p.queue}" in namespace "${p.namespace}" is declared twice`);
    seen.add(key);
    out.push(p);
  };
  // A name as the engine will take it (control characters, length): checked here, so no file is
  // found wrong halfway through being applied.
  const str = (x: unknown, what: string): string => {
    if (typeof x !== 'string' || x.length === 0) throw invalidArg(`${what} must be a non-empty string`);
    return v.name(x, what);
  };

  list('cache').forEach((q, i) => at(`cache[${i}]`, (where) => {
    onlyKeys(q, ['namespace', 'name', ...CACHE_SETTING_KEYS], 'cache queue');
    add({ where, dialect: 'cache', namespace: str(q.namespace, 'namespace'), queue: str(q.name, 'name'), policy: { ...PRESETS.cache, ...cachePolicy(q) } });
  }));
  list('env').forEach((q, i) => at(`env[${i}]`, (where) => {
    onlyKeys(q, ['project', 'environment', 'slug', 'consumer', ...ENV_SETTING_KEYS], 'env queue');
    const consumer = q.consumer;
    const policy = { ...PRESETS.env, ...envPolicy(q) };
    if (consumer !== undefined && consumer !== null) {
      if (typeof consumer !== 'object' || Array.isArray(consumer)) throw invalidArg('consumer must be an object { appId, … } or null');
      onlyKeys(consumer as Record<string, unknown>, ['appId', 'maxBatchSize', 'maxBatchTimeoutMs', 'maxConcurrency', 'visibilityMs'], 'consumer');
      // (Not a name: consumerSettings checks it as setting a consumer over HTTP or by runConsumer does.)
      consumerSettings(consumer as Record<string, unknown>, policy.leaseMs); // its ranges, as setting it will check them
    }
    add({
      where, dialect: 'env', namespace: v.name(envNamespace(q.project, q.environment), 'project/environment'), queue: str(q.slug, 'slug'),
      policy, consumer: consumer as Record<string, unknown> | null | undefined,
    });
  }));
  list('sync').forEach((q, i) => at(`sync[${i}]`, (where) => {
    onlyKeys(q, ['tenantId', 'prefix', 'id', 'limits', 'delivery', 'ordering'], 'sync queue');
    checkOrdering(q.ordering);
    // The namespace a handle with this prefix and tenant uses (quayside/sync's queue()).
    const tenant = q.tenantId === undefined ? 'default' : str(q.tenantId, 'tenantId');
    const namespace = syncNamespace(q.prefix === undefined ? DEFAULT_PREFIX : str(q.prefix, 'prefix'), tenant);
    add({ where, dialect: 'sync', namespace, queue: str(q.id, 'id'), policy: { ...PRESETS.sync, ...syncPolicy(q.limits, q.delivery) } });
  }));
  return out;
}

const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);

/**
 * Reads `file` (a quayside.json) and creates or updates its queues in `engine`. Every queue is
 * checked before anything changes; a queue of another dialect under the same name is a conflict.
 */
export async function applyWorkspaceConfig(engine: Engine, file: string): Promise<AppliedQueue[]> {
  return applyWorkspacePlan(engine, planWorkspaceConfig(readWorkspaceConfig(file), file));
}

/**
 * Reads and parses `file` without an engine; planWorkspaceConfig() then checks it, so a start can
 * refuse a bad file before it opens the data directory. What only the queues can tell (a
 * conflict) is found when the plan is applied.
 */
export function readWorkspaceConfig(file: string, source = file): unknown {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (e) {
    throw invalidArg(`${source}: cannot be read: ${(e as Error).message}`);
  }
  // A byte order mark, as an editor on Windows may save it, is not JSON's: dropped before the parse,
  // so an error's position counts in the same text.
  const json = text.replace(/^\uFEFF/, '');
  let parsed: unknown;
  try {
    parsed = JSON.parse(json);
  } catch (e) {
    throw invalidArg(`${source}: not JSON: ${(e as Error).message}${lineAndColumn(json, (e as Error).message)}`);
  }
  return parsed;
}

/** " (line 3, column 14)" for the "at position 51" of V8's JSON.parse error, which an editor cannot go to. */
function lineAndColumn(text: string, message: string): string {
  const m = /at position (\d+)/.exec(message);
  if (!m || /\(line \d+/.test(message)) return ''; // Node 21+ says it itself
  const before = text.slice(0, Number(m[1]));
  const line = before.split('\n').length;
  return ` (line ${line}, column ${before.length - before.lastIndexOf('\n')})`;
}

/** Creates or updates the queues of a checked config (planWorkspaceConfig) in `engine`. */
export async function applyWorkspacePlan(engine: Engine, plan: Planned[]): Promise<AppliedQueue[]> {
  const existing = new Map<string, { dialect: Dialect; policy: QueuePolicy; consumer: ConsumerSettings | null }>();
  for (const p of plan) {
    try {
      const q = await engine.getQueue({ namespace: p.namespace, queue: p.queue }, SYSTEM_ACTOR);
      if (q.dialect !== p.dialect) throw new QuaysideError('conflict', `${p.where}: queue "${p.queue}" in namespace "${p.namespace}" is ${q.dialect === 'env' ? 'an' : 'a'} ${q.dialect} queue; the config declares it as ${p.dialect}`);
      existing.set(`${p.namespace}\u0000${p.queue}`, q);
    } catch (e) {
      if (!(e instanceof QuaysideError) || e.code !== 'not_found') throw e;
    }
  }
  const out: AppliedQueue[] = [];
  for (const p of plan) {
    const ref = { namespace: p.namespace, queue: p.queue };
    const cur = existing.get(`${p.namespace}\u0000${p.queue}`);
    let action: AppliedQueue['action'];
    if (!cur) {
      await engine.createQueue({ ...ref, dialect: p.dialect, policy: p.policy, ifNotExists: true }, SYSTEM_ACTOR);
      action = 'created';
    } else if (!same(cur.policy, p.policy)) {
      await engine.configureQueue({ ...ref, policy: p.policy }, SYSTEM_ACTOR);
      action = 'updated';
    } else action = 'unchanged';
    if (p.consumer !== undefined) {
      const want = p.consumer;
      const have = cur?.consumer ?? null;
      // Compared as it will be set (defaults for what the file leaves out), so a setting removed
      // from the file returns to its default, as for policies.
      const full = want === null ? null : consumerSettings(want as unknown as Record<string, unknown>, p.policy.leaseMs);
      const differs = full === null ? have !== null : !have || Object.entries(full).some(([k, v]) => (have as unknown as Record<string, unknown>)[k] !== v);
      if (differs) {
        await engine.setConsumer({ ...ref, consumer: want }, SYSTEM_ACTOR);
        if (action === 'unchanged') action = 'updated';
      }
    }
    out.push({ dialect: p.dialect, namespace: p.namespace, queue: p.queue, action });
  }
  return out;
}
