import crypto from 'node:crypto';
import { QuaysideError, invalid } from '../errors';
import type { Access } from '../protocol';
import type { QueueStore } from '../store/boundary';
import type { Clock } from './clock';
import * as v from './validate';

// Tokens (DESIGN.md "Access"): read-only or read-write, for one namespace or all, kept in the
// store; who a token is, for scoping and for the audit log.

/** Who asks: used for namespace scoping and the audit log. */
export interface Actor {
  /** The token's name, a label its creator chose. */
  name: string;
  /** The token's id (`tokenId()`), which tells apart tokens that share a name; null: the engine's own caller. */
  tokenId: string | null;
  namespace: string | null;
}

export const SYSTEM_ACTOR: Actor = { name: 'system', tokenId: null, namespace: null };

/**
 * A token's public id for the audit log: a keyed fingerprint of the secret (HMAC with a random key
 * kept in the data directory), the same for every use of one token and different between tokens.
 * Keyed, so an id is no help in testing guesses of a token someone chose (`--token dev`).
 */
export function tokenId(key: string, token: string): string {
  return `tok_${crypto.createHmac('sha256', key).update(token).digest('hex').slice(0, 12)}`;
}

/** `meta` key of the token-id key (see tokenId). */
const TOKEN_ID_KEY = 'token_id_key';

/** The tokens of one data directory. Its writes run in the caller's transaction (the engine's op). */
export class TokenBook {
  private idKey: string | null = null;

  constructor(
    private readonly store: QueueStore,
    private readonly clock: Clock,
  ) {}

  /**
   * A new token: `access` read or readwrite, for one `namespace` (null: all), named for the audit
   * log. Its arguments are checked here for every caller (the protocol, startEmulator's handle); a
   * token scoped to one namespace makes tokens for that namespace only.
   */
  create(access: unknown, namespace: unknown, name: unknown, actor: Actor): string {
    if (access !== 'read' && access !== 'readwrite') throw invalid(`access must be "read" or "readwrite", got ${v.describe(access)}`);
    if (namespace !== null) v.name(namespace, 'namespace');
    v.str(name, 'name', 200);
    if (actor.namespace !== null && namespace !== actor.namespace) throw new QuaysideError('forbidden', `this token can only create tokens for namespace "${actor.namespace}"`);
    const token = `qs_${access === 'read' ? 'ro' : 'rw'}_${crypto.randomBytes(18).toString('base64url')}`;
    this.store.putToken(token, name as string, access, namespace as string | null, this.clock.now());
    return token;
  }

  /** A token given at start (or kept from an earlier run) that grants read-write on everything; in a transaction of its own. */
  ensureAdmin(token: string | undefined): string {
    const known = token === undefined ? null : this.store.getToken(token);
    if (known && (known.access !== 'readwrite' || known.ns !== null)) {
      // Taking it as the admin token would quietly give every holder of a narrower token all rights.
      throw new QuaysideError('invalid_argument', `it is already a ${known.access === 'read' ? 'read-only' : 'read-write'} token for ${known.ns === null ? 'every namespace' : `namespace "${known.ns}"`} on this data directory; the emulator's own token must be another`, { details: { field: 'token' } });
    }
    const t = token ?? this.store.getMeta('admin_token') ?? `qs_rw_${crypto.randomBytes(18).toString('base64url')}`;
    this.store.transaction(() => {
      this.store.setMeta('admin_token', t);
      this.store.putToken(t, 'admin', 'readwrite', null, this.clock.now());
      this.key();
    });
    return t;
  }

  /** Who a token is, as an actor with its access; null for a token this emulator does not know. */
  lookup(token: string): (Actor & { access: Access }) | null {
    const r = this.store.getToken(token);
    return r ? { name: r.name, tokenId: tokenId(this.key(), token), access: r.access as Access, namespace: r.ns } : null;
  }

  /** The key of token ids, made once per data directory. */
  private key(): string {
    if (this.idKey) return this.idKey;
    let key = this.store.getMeta(TOKEN_ID_KEY);
    if (!key) {
      key = crypto.randomBytes(32).toString('base64url');
      this.store.setMeta(TOKEN_ID_KEY, key);
    }
    this.idKey = key;
    return key;
  }
}
