import { invalid } from '../errors';
import type { QueueInfo } from '../protocol';

// How the env product's names map onto the engine: a (project, environment) pair is one namespace.

export const ENV_MAX_RETENTION_S = 14 * 24 * 3600;

export function envNamespace(project: unknown, environment: unknown): string {
  return `${checkProject(project)}/${checkEnvironment(environment)}`;
}

export function checkProject(project: unknown): string {
  if (typeof project !== 'string' || project.length === 0 || project.length > 100 || project.includes('/')) {
    throw invalid('project must be a non-empty string without "/"');
  }
  return project;
}

export function checkEnvironment(environment: unknown): string {
  if (typeof environment !== 'string' || environment.length === 0 || environment.length > 100) {
    throw invalid('environment must be a non-empty string');
  }
  return environment;
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
