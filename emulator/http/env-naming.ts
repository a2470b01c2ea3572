import { invalid } from '../errors';
import { LIMITS, nameProblem, type QueueInfo, type QueuePolicy } from '../protocol';

// How the env product's names map onto the engine: a (project, environment) pair is one namespace.

export const ENV_MAX_RETENTION_S = 14 * 24 * 3600;

export function envNamespace(project: unknown, environment: unknown): string {
  const ns = `${checkProject(project)}/${checkEnvironment(environment)}`;
  // Said in this API's names: the engine would refuse "namespace", which the caller never gave.
  if (ns.length > LIMITS.maxNameChars) {
    throw invalid(`project and environment must be at most ${LIMITS.maxNameChars - 1} characters together, got ${ns.length - 1}`);
  }
  return ns;
}

/** The queue settings of the console / management API (POST/PATCH /v1/queues, and quayside.json). */
export const ENV_SETTING_KEYS = ['maxRetries', 'maxDepth', 'maxBytes', 'retentionSeconds', 'visibilityMs'] as const;

export function wholeNumber(v: unknown, name: string, min: number, max: number): number | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'number' || !Number.isFinite(v) || !Number.isInteger(v) || v < min || v > max) throw invalid(`${name} must be a whole number from ${min} to ${max}, got ${typeof v === 'number' ? String(v) : JSON.stringify(v)}`);
  return v;
}

/** The product's settings → the engine's policy fields (null or absent: the preset's). */
export function envPolicy(b: Record<string, unknown>): Partial<QueuePolicy> {
  const p: Partial<QueuePolicy> = {};
  const retries = wholeNumber(b.maxRetries, 'maxRetries', 0, 100);
  if (retries !== undefined) p.maxDeliveries = retries + 1;
  if (b.maxDepth !== undefined) p.maxDepth = b.maxDepth === null ? null : wholeNumber(b.maxDepth, 'maxDepth', 1, 1e9)!;
  if (b.maxBytes !== undefined) p.maxBytes = b.maxBytes === null ? null : wholeNumber(b.maxBytes, 'maxBytes', 1, 1e15)!;
  const retention = wholeNumber(b.retentionSeconds, 'retentionSeconds', 60, ENV_MAX_RETENTION_S);
  if (retention !== undefined) {
    p.maxMessageAgeMs = retention * 1000;
    p.deadRetentionMs = retention * 1000;
  }
  const vis = wholeNumber(b.visibilityMs, 'visibilityMs', 1, 12 * 3600 * 1000);
  if (vis !== undefined) p.leaseMs = vis;
  return p;
}

/** The longest project or environment name. */
export const ENV_MAX_SCOPE_CHARS = 100;

export function checkProject(project: unknown): string {
  if (typeof project !== 'string' || project.length === 0 || project.length > ENV_MAX_SCOPE_CHARS || project.includes('/')) {
    throw invalid(`project must be a non-empty string of at most ${ENV_MAX_SCOPE_CHARS} characters, without "/"${got(project)}`);
  }
  return scopePart(project, 'project');
}

export function checkEnvironment(environment: unknown): string {
  if (typeof environment !== 'string' || environment.length === 0 || environment.length > ENV_MAX_SCOPE_CHARS) {
    throw invalid(`environment must be a non-empty string of at most ${ENV_MAX_SCOPE_CHARS} characters${got(environment)}`);
  }
  return scopePart(environment, 'environment');
}

/** The namespace's rules (control characters, lone surrogates) said in the field's own name. */
function scopePart(s: string, field: 'project' | 'environment'): string {
  const problem = nameProblem(s);
  if (problem) throw invalid(`${field} ${problem}`);
  return s;
}

/** What was wrong, briefly: a long name by its length (it may be long indeed), else its type. */
function got(v: unknown): string {
  if (typeof v !== 'string') return `, got ${v === null ? 'null' : typeof v}`;
  return v.length > ENV_MAX_SCOPE_CHARS ? `, got ${v.length} characters` : '';
}

export function splitEnvNamespace(ns: string): { project: string; environment: string } {
  const i = ns.indexOf('/');
  return i < 0 ? { project: ns, environment: '' } : { project: ns.slice(0, i), environment: ns.slice(i + 1) };
}

/** A queue as the env management API shows it. */
export function envQueueView(q: QueueInfo) {
  const { project, environment } = splitEnvNamespace(q.namespace);
  return {
    id: q.id,
    slug: q.name,
    project,
    environment,
    consumer: q.consumer,
    maxRetries: q.policy.maxDeliveries - 1,
    maxDepth: q.policy.maxDepth,
    maxBytes: q.policy.maxBytes,
    retentionSeconds: q.policy.maxMessageAgeMs === null ? null : Math.round(q.policy.maxMessageAgeMs / 1000),
    visibilityMs: q.policy.leaseMs,
    createdAt: q.createdAt,
    counts: { ...q.counts, failed: q.counts.dead, inFlight: q.counts.leased },
  };
}
