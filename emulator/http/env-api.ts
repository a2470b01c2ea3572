import type http from 'node:http';
import { QuaysideError, invalid, isCode } from '../errors';
import type { Actor, Engine } from '../engine/engine';
import * as validate from '../engine/validate';
import { HTTP_STATUS, LIMITS, READ_OPS, contentTypeProblem, isBase64Text, isBinaryContentType, type OpName, type QueueInfo } from '../protocol';
import { authorize, bearer, resolveToken } from '../server/auth';
import { json, type HttpRoute } from '../server/server';
import { checkEnvironment, checkProject, envNamespace, envPolicy, envQueueView, ENV_SETTING_KEYS, wholeNumber } from './env-naming';

// The `env` dialect's HTTP management and data API under /v1/queues (docs/openapi.yaml).
// It speaks the product's names (slug, project, environment, leaseId, failed area) and maps them
// onto engine operations.

const MAX_BODY = 8 * 1024 * 1024;

interface Ctx {
  engine: Engine;
  actor: Actor;
  access: 'read' | 'readwrite';
  body: Record<string, unknown>;
  query: URLSearchParams;
}

/** `query`: the query parameters the route reads; any other is refused, as an unknown body field is. */
type Route = { method: string; pattern: RegExp; op: OpName; query?: string[]; run: (c: Ctx, m: RegExpExecArray) => Promise<[number, unknown]> };

const ROUTES: Route[] = [
  { method: 'POST', pattern: /^\/v1\/queues$/, op: 'queue.create', run: createQueue },
  { method: 'GET', pattern: /^\/v1\/queues$/, op: 'queue.list', query: ['project', 'environment'], run: listQueues },
  { method: 'GET', pattern: /^\/v1\/queues\/([^/]+)$/, op: 'stats', run: getQueue },
  { method: 'PATCH', pattern: /^\/v1\/queues\/([^/]+)$/, op: 'queue.configure', run: patchQueue },
  { method: 'DELETE', pattern: /^\/v1\/queues\/([^/]+)$/, op: 'queue.delete', run: deleteQueue },
  { method: 'PUT', pattern: /^\/v1\/queues\/([^/]+)\/consumer$/, op: 'consumer.set', run: putConsumer },
  { method: 'POST', pattern: /^\/v1\/queues\/([^/]+)\/messages$/, op: 'push', run: sendMessages },
  { method: 'GET', pattern: /^\/v1\/queues\/([^/]+)\/messages$/, op: 'peek', query: ['failed', 'limit', 'cursor'], run: peekMessages },
  { method: 'POST', pattern: /^\/v1\/queues\/([^/]+)\/receive$/, op: 'pull', run: receive },
  { method: 'POST', pattern: /^\/v1\/queues\/([^/]+)\/ack$/, op: 'ack', run: ackRetry },
  { method: 'POST', pattern: /^\/v1\/queues\/([^/]+)\/extend$/, op: 'extend', run: extend },
  { method: 'POST', pattern: /^\/v1\/queues\/([^/]+)\/retry-failed$/, op: 'dead.replay', run: retryFailed },
  { method: 'POST', pattern: /^\/v1\/queues\/([^/]+)\/purge$/, op: 'purge', run: purge },
];

/** The route table, exported so a test can check it against docs/openapi.yaml. */
export const ENV_ROUTES = ROUTES.map((r) => ({ method: r.method, path: r.pattern.source.replace(/^\^|\$$/g, '').replace(/\\\//g, '/').replace('([^/]+)', '{qId}') }));

export function envHttpRoutes(): HttpRoute[] {
  return [handle];
}

const handle: HttpRoute = async (req, res, engine) => {
  const url = new URL(req.url ?? '/', 'http://localhost');
  if (!url.pathname.startsWith('/v1/queues')) return false;
  const matching = ROUTES.filter((r) => r.pattern.test(url.pathname));
  if (matching.length === 0) return false;
  // HEAD is GET without the body (Node leaves the body out), as for /healthz and /metrics.
  const method = req.method === 'HEAD' ? 'GET' : req.method;
  const route = matching.find((r) => r.method === method);
  const allowed = matching.flatMap((r) => (r.method === 'GET' ? ['GET', 'HEAD'] : [r.method]));
  try {
    if (!route) throw new QuaysideError('invalid_argument', `${req.method} is not allowed on ${url.pathname}; use ${allowed.join(', ')}`);
    const who = resolveToken(engine, bearer(req.headers.authorization));
    try {
      authorize(who.access, route.method === 'GET' ? 'peek' : route.op, READ_OPS);
    } catch {
      // Worded by the route the caller sent, not the engine operation behind it.
      throw new QuaysideError('forbidden', `this token is read-only; ${route.method} ${url.pathname} needs a read-write token`, { details: { readOnly: true } });
    }
    // A misspelt ?faild=1 would otherwise peek the live messages as if it were not there.
    for (const k of new Set(url.searchParams.keys())) {
      if (!route.query?.includes(k)) throw invalid(route.query ? `unknown query parameter "${k}"; expected ${route.query.join(', ')}` : `unknown query parameter "${k}"; ${route.method} ${url.pathname} takes none`);
      // ?limit=10&limit=500 has no one meaning; taking either would answer a question not asked.
      if (url.searchParams.getAll(k).length > 1) throw invalid(`query parameter "${k}" is given more than once`);
    }
    const body = method === 'GET' || method === 'DELETE' ? {} : await readJson(req);
    const m = route.pattern.exec(url.pathname)!;
    const [status, out] = await route.run({ engine, actor: { name: who.name, tokenId: who.tokenId, namespace: who.namespace }, access: who.access, body, query: url.searchParams }, m);
    json(res, status, out);
  } catch (e) {
    const err = e instanceof QuaysideError ? e : new QuaysideError('internal', (e as Error).message);
    const status = !route && err.code === 'invalid_argument' ? 405 : HTTP_STATUS[err.code];
    // What RFC 9110 asks of these two answers: the methods that would do, and the scheme to use.
    if (status === 405) res.setHeader('allow', allowed.join(', '));
    if (status === 401) res.setHeader('www-authenticate', 'Bearer realm="quayside"');
    const payload: Record<string, unknown> = { code: err.code, message: err.message };
    if (err.resetAt !== undefined) {
      payload.resetAt = err.resetAt;
      res.setHeader('retry-after', String(Math.max(1, Math.ceil((err.resetAt - engine.now()) / 1000))));
    }
    json(res, status, { error: payload });
  }
  return true;
};

const UTF8 = new TextDecoder('utf-8', { fatal: true });

function readJson(req: http.IncomingMessage): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let tooBig = false;
    req.on('data', (c: Buffer) => {
      if (tooBig) return; // the rest is read and dropped, so the client gets its 413 instead of a reset
      size += c.length;
      if (size > MAX_BODY) {
        tooBig = true;
        chunks.length = 0;
        reject(new QuaysideError('payload_too_large', `a request body is at most ${MAX_BODY} bytes`));
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => {
      if (tooBig) return;
      let text: string;
      try {
        // Not toString(): that turns bytes that are not UTF-8 into U+FFFD, and stores them so.
        text = UTF8.decode(Buffer.concat(chunks));
      } catch {
        return reject(invalid('the request body is not valid UTF-8'));
      }
      if (text.trim() === '') return resolve({});
      try {
        const v = JSON.parse(text);
        if (typeof v !== 'object' || v === null || Array.isArray(v)) return reject(invalid('the request body must be a JSON object'));
        resolve(v);
      } catch (e) {
        reject(invalid(`the request body is not JSON: ${(e as Error).message}`));
      }
    });
    req.on('error', reject);
  });
}

// ---------------------------------------------------------------- helpers

async function queueById(c: Ctx, id: string): Promise<QueueInfo> {
  let qId: string;
  try {
    qId = decodeURIComponent(id);
  } catch {
    // A malformed escape (%ZZ) names no queue.
    throw new QuaysideError('not_found', `queue ${id} not found`);
  }
  const q = await c.engine.getQueue({ id: qId }, c.actor);
  if (q.dialect !== 'env') throw new QuaysideError('not_found', `queue ${id} not found`);
  return q;
}

// queueId: each route found the queue by id in one engine operation and acts in another; the
// engine refuses (not_found) if the name now belongs to a queue made since (deleted and made again).
const ref = (q: QueueInfo) => ({ namespace: q.namespace, queue: q.name, queueId: q.id });

/** Refuses a key outside `allowed`, naming it with its path (`at`, e.g. `retries[0].`): a misspelt delay would otherwise be ignored. */
function onlyKnown(b: Record<string, unknown>, allowed: readonly string[], at = ''): void {
  for (const k of Object.keys(b)) if (!allowed.includes(k)) throw invalid(`unknown field "${at}${k}"; expected ${allowed.join(', ')}`);
}

/**
 * The content types env.queue.send knows, as they travel: json (any JSON value), text (a string),
 * bytes and v8 (base64 text; the env client encodes a Uint8Array, or a value's v8 serialisation,
 * so). Any other label, such as a MIME type, is kept as given with a JSON body, as the client does.
 */
function checkContent(body: unknown, contentType: unknown, at: string): void {
  if (contentType === 'text') {
    if (typeof body !== 'string') throw invalid(`${at}body must be a string with contentType "text"`);
    return;
  }
  if (isBinaryContentType(contentType)) {
    if (!isBase64Text(body)) {
      throw invalid(`${at}body must be base64 text with contentType "${contentType}"`);
    }
    return;
  }
  if (contentType === undefined || contentType === null || contentType === 'json') return;
  const problem = contentTypeProblem(contentType);
  if (problem) throw invalid(`${at}${problem}`);
}

function sendInput(m: Record<string, unknown>, at = '') {
  if (typeof m !== 'object' || m === null || Array.isArray(m)) throw invalid(`${at || 'message'} must be an object`);
  onlyKnown(m, ['body', 'contentType', 'delaySeconds', 'attributes', 'dedupId'], at);
  if (!('body' in m)) throw invalid(`${at}body is missing`);
  const delay = wholeNumber(m.delaySeconds, `${at}delaySeconds`, 0, 43200);
  checkContent(m.body, m.contentType, at);
  // Checked here, with the engine's own rule, so the error names this API's field, not dedupeKey.
  validate.optStr(m.dedupId, `${at}dedupId`, 512);
  return {
    body: m.body,
    contentType: m.contentType as string | undefined,
    delayMs: delay === undefined ? undefined : delay * 1000,
    attributes: m.attributes as Record<string, unknown> | undefined,
    dedupeKey: m.dedupId as string | undefined,
  };
}

// ---------------------------------------------------------------- routes

async function createQueue(c: Ctx): Promise<[number, unknown]> {
  onlyKnown(c.body, ['project', 'environment', 'slug', ...ENV_SETTING_KEYS]);
  validate.name(c.body.slug, 'slug'); // the engine's rule for a queue name, under this API's field name
  const namespace = envNamespace(c.body.project, c.body.environment);
  const q = await c.engine.createQueue({ namespace, queue: c.body.slug as string, dialect: 'env', policy: envPolicy(c.body) }, c.actor);
  return [201, envQueueView(q)];
}

async function listQueues(c: Ctx): Promise<[number, unknown]> {
  const project = c.query.get('project');
  const environment = c.query.get('environment');
  // Either filter alone narrows the list too: one project in every environment, or one environment
  // across projects. Both together name one namespace, which the engine filters on directly.
  if (project !== null) checkProject(project);
  if (environment !== null) checkEnvironment(environment);
  const namespace = project !== null && environment !== null ? envNamespace(project, environment) : undefined;
  const { queues } = await c.engine.listQueues({ namespace, dialect: 'env' }, c.actor);
  const views = queues.map(envQueueView).filter((q) => (project === null || q.project === project) && (environment === null || q.environment === environment));
  return [200, { queues: views }];
}

async function getQueue(c: Ctx, m: RegExpExecArray): Promise<[number, unknown]> {
  const q = await queueById(c, m[1]);
  const stats = await c.engine.stats(ref(q), c.actor);
  return [200, { ...envQueueView(q), lag_history: stats.lagHistory }];
}

async function patchQueue(c: Ctx, m: RegExpExecArray): Promise<[number, unknown]> {
  onlyKnown(c.body, ENV_SETTING_KEYS);
  const q = await queueById(c, m[1]);
  return [200, envQueueView(await c.engine.configureQueue({ ...ref(q), policy: envPolicy(c.body) }, c.actor))];
}

async function deleteQueue(c: Ctx, m: RegExpExecArray): Promise<[number, unknown]> {
  const q = await queueById(c, m[1]);
  return [200, await c.engine.deleteQueue(ref(q), c.actor)];
}

async function putConsumer(c: Ctx, m: RegExpExecArray): Promise<[number, unknown]> {
  onlyKnown(c.body, ['appId', 'maxBatchSize', 'maxBatchTimeoutMs', 'maxConcurrency', 'visibilityMs']);
  if (!('appId' in c.body)) throw invalid('appId is required (null makes it a pull queue)');
  const q = await queueById(c, m[1]);
  const extra = Object.keys(c.body).find((k) => k !== 'appId' && c.body[k] !== undefined && c.body[k] !== null);
  // A pull queue has no batch settings: one given with appId null would be dropped without a word.
  if (c.body.appId === null && extra !== undefined) throw invalid(`${extra} is a consumer app's setting; with appId null the queue becomes a pull queue and keeps none`);
  // A batch setting given as null is not given: the consumer keeps the default.
  const consumer = c.body.appId === null ? null : Object.fromEntries(Object.entries(c.body).filter(([, v]) => v !== null));
  return [200, envQueueView(await c.engine.setConsumer({ ...ref(q), consumer }, c.actor))];
}

async function sendMessages(c: Ctx, m: RegExpExecArray): Promise<[number, unknown]> {
  const q = await queueById(c, m[1]);
  if ('messages' in c.body) {
    onlyKnown(c.body, ['messages']);
    if (!Array.isArray(c.body.messages)) throw invalid('messages must be an array');
    const messages = c.body.messages.map((x, i) => sendInput(x as Record<string, unknown>, `messages[${i}].`));
    const r = await c.engine.pushBatch({ ...ref(q), dialect: 'env', messages }, c.actor);
    return [201, { ids: r.results.map((x) => x.id) }];
  }
  // dialect: the queue found by id is still an env queue when the push runs.
  const r = await c.engine.push({ ...ref(q), dialect: 'env', ...sendInput(c.body) }, c.actor);
  return [201, { id: r.id }];
}

async function peekMessages(c: Ctx, m: RegExpExecArray): Promise<[number, unknown]> {
  const q = await queueById(c, m[1]);
  const failedText = c.query.get('failed');
  if (failedText !== null && !['1', '0', 'true', 'false', ''].includes(failedText)) throw invalid(`failed must be 1, 0, true or false, got ${JSON.stringify(failedText)}`);
  const failed = failedText === '1' || failedText === 'true';
  const limitText = c.query.get('limit');
  // Up to 1,000 at once (the most a page holds), so a test's peek sees a whole small queue.
  // Digits only: Number() would also read 0x10, 1e2 and " 5", which are not the integer the API names.
  if (limitText !== null && !/^[0-9]{1,7}$/.test(limitText)) throw invalid(`limit must be a whole number from 1 to ${LIMITS.maxPageSize}, got ${JSON.stringify(limitText)}`);
  const limit = limitText === null ? 1000 : Number(limitText);
  const cursor = c.query.get('cursor') ?? undefined;
  // The failed area in the order messages failed (oldest first), as retry-failed takes them and the
  // dead-letter lists show them; the live messages in the order they were sent.
  const page = failed
    ? await c.engine.deadList({ ...ref(q), limit, cursor }, c.actor)
    : await c.engine.peek({ ...ref(q), states: ['ready', 'delayed', 'leased'], limit, cursor }, c.actor);
  return [200, {
    messages: page.messages.map((x) => ({
      id: x.id, body: x.body, state: failed ? 'failed' : x.state, attempts: x.attempts, attributes: x.attributes ?? {},
      contentType: x.contentType ?? 'json', timestamp: x.enqueuedAt, visibleAt: x.visibleAt, leaseExpiresAt: x.leaseUntil,
      ...(failed ? { failedAt: x.deadAt, reason: x.deadReason, lastError: x.lastError } : {}),
    })),
    total: page.total,
    next: page.next,
  }];
}

async function receive(c: Ctx, m: RegExpExecArray): Promise<[number, unknown]> {
  onlyKnown(c.body, ['max', 'visibilityMs']);
  const q = await queueById(c, m[1]);
  const max = wholeNumber(c.body.max, 'max', 1, 100) ?? 10;
  const leaseMs = wholeNumber(c.body.visibilityMs, 'visibilityMs', 1, 12 * 3600 * 1000);
  let messages;
  try {
    ({ messages } = await c.engine.pull({ ...ref(q), max, leaseMs }, c.actor));
  } catch (e) {
    // A consumer app outlives the runConsumer() that set it (a deployed consumer not running): say how to pull.
    if (isCode(e, 'conflict') && q.consumer) throw new QuaysideError('conflict', `${(e as Error).message}; PUT /v1/queues/${q.id}/consumer { "appId": null } makes it a pull queue`);
    throw e;
  }
  return [200, {
    messages: messages.map((x) => ({
      id: x.id, body: x.body, attempts: x.attempts, attributes: x.attributes ?? {}, contentType: x.contentType ?? 'json',
      timestamp: x.enqueuedAt, leaseId: x.receipt, leaseExpiresAt: x.leaseUntil,
    })),
  }];
}

async function ackRetry(c: Ctx, m: RegExpExecArray): Promise<[number, unknown]> {
  onlyKnown(c.body, ['acks', 'retries']);
  const q = await queueById(c, m[1]);
  const given = c.body.acks ?? [];
  const retries = c.body.retries ?? [];
  if (!Array.isArray(given)) throw invalid('acks must be an array of leaseIds');
  // A leaseId, or { leaseId } in the shape retries take (a caller writing both alike is not wrong).
  const acks = given.map((a, i) => {
    if (typeof a === 'string') return a;
    if (typeof a !== 'object' || a === null || Array.isArray(a)) throw invalid(`acks[${i}] must be a leaseId (or { leaseId })`);
    onlyKnown(a, ['leaseId'], `acks[${i}].`);
    if (typeof a.leaseId !== 'string') throw invalid(`acks[${i}].leaseId must be a string`);
    return a.leaseId;
  });
  if (!Array.isArray(retries)) throw invalid('retries must be an array of { leaseId, delaySeconds? }');
  const nacks = retries.map((r, i) => {
    if (typeof r !== 'object' || r === null || Array.isArray(r)) throw invalid(`retries[${i}] must be an object { leaseId, delaySeconds? }`);
    onlyKnown(r, ['leaseId', 'delaySeconds'], `retries[${i}].`);
    if (typeof r.leaseId !== 'string') throw invalid(`retries[${i}].leaseId must be a string`);
    const d = wholeNumber(r.delaySeconds, `retries[${i}].delaySeconds`, 0, 43200);
    return { receipt: r.leaseId, delayMs: d === undefined ? undefined : d * 1000 };
  });
  // One transition: a bad leaseId anywhere settles nothing, and a lease of another queue is stale.
  const r = await c.engine.settleBatch({ ...ref(q), acks, nacks }, c.actor);
  return [200, { acked: r.acked, retried: r.nacked, stale: r.stale }];
}

async function extend(c: Ctx, m: RegExpExecArray): Promise<[number, unknown]> {
  onlyKnown(c.body, ['leaseId', 'visibilityMs']);
  const q = await queueById(c, m[1]);
  if (typeof c.body.leaseId !== 'string') throw invalid('leaseId must be a string');
  // Required (DESIGN's route table marks none of extend's fields optional): the new lease's length.
  if (c.body.visibilityMs === undefined || c.body.visibilityMs === null) throw invalid('visibilityMs is required: how long the lease runs from now, in ms');
  const leaseMs = wholeNumber(c.body.visibilityMs, 'visibilityMs', 1, 12 * 3600 * 1000);
  const r = await c.engine.extend({ ...ref(q), receipt: c.body.leaseId, leaseMs }, c.actor);
  if (!r.ok) throw new QuaysideError('conflict', 'the lease has ended, belongs to another queue or was never valid; nothing was extended');
  return [200, { leaseExpiresAt: r.leaseUntil }];
}

async function retryFailed(c: Ctx, m: RegExpExecArray): Promise<[number, unknown]> {
  onlyKnown(c.body, ['max']);
  const q = await queueById(c, m[1]);
  const max = wholeNumber(c.body.max, 'max', 1, LIMITS.maxReplay) ?? 100;
  const r = await c.engine.replay({ ...ref(q), max }, c.actor);
  return [200, { retried: r.replayed }];
}

async function purge(c: Ctx, m: RegExpExecArray): Promise<[number, unknown]> {
  onlyKnown(c.body, ['confirm', 'failed']);
  const q = await queueById(c, m[1]);
  if (c.body.confirm !== q.name) throw invalid(`confirm must be the queue's slug ("${q.name}"); nothing was purged`);
  // null is "not given", as for every optional field of this API (appId, maxDepth, maxBytes excepted: their null means none).
  // 1 and 0 too, as the peek's ?failed=1 (the seed's form) takes them.
  const f = c.body.failed;
  if (f !== undefined && f !== null && typeof f !== 'boolean' && f !== 1 && f !== 0) throw invalid(`failed must be true or false (or 1 or 0), got ${JSON.stringify(f)}`);
  const r = f === true || f === 1 ? await c.engine.purgeDead(ref(q), c.actor) : await c.engine.purge({ ...ref(q), confirm: q.name }, c.actor);
  return [200, r];
}
