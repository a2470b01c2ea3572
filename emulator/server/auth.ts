import { QuaysideError } from '../errors';
import { describe } from '../engine/validate';
import type { Engine } from '../engine/engine';
import type { Access, OpName } from '../protocol';

/** Looks a token up; a missing or unknown token is `unauthorized`. */
export function resolveToken(engine: Engine, token: unknown): NonNullable<ReturnType<Engine['lookupToken']>> {
  if (token === undefined || token === null || token === '') throw new QuaysideError('unauthorized', 'a token is required (QUAYSIDE_TOKEN, or the one `quayside start` printed)');
  if (typeof token !== 'string') throw new QuaysideError('unauthorized', `a token is a string; got ${describe(token)}`);
  const who = token.length <= 200 ? engine.lookupToken(token) : null;
  if (!who) {
    // A token read from a file or pasted often carries a newline or a space; say so rather than guess.
    const spaced = token.trim() !== token ? ' (it starts or ends with whitespace, such as a newline from a file: tokens have none)' : '';
    throw new QuaysideError('unauthorized', `the token is not known to this emulator${spaced}`);
  }
  return who;
}

/** Read-only tokens may list, peek and read stats; everything else needs read-write. */
export function authorize(access: Access, op: OpName, readOps: ReadonlySet<OpName>): void {
  if (access === 'readwrite' || readOps.has(op)) return;
  // details.readOnly: a client can word the refusal by its own call without reading this text.
  throw new QuaysideError('forbidden', `a read-only token cannot call "${op}"`, { details: { op, readOnly: true } });
}

/** Bearer token from an HTTP Authorization header. */
export function bearer(header: string | undefined): string | undefined {
  if (!header) return undefined;
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return m ? m[1] : undefined;
}

/**
 * A WebSocket upgrade from a web page carries its Origin; a page in the user's browser must not
 * reach the emulator. Node clients and the extension host send no Origin, so any Origin is refused:
 * a VS Code webview is a web page too (the extension's own panel talks to its host by messages).
 */
export function originAllowed(origin: string | string[] | undefined): boolean {
  return origin === undefined || origin === '';
}

/** Guards against DNS rebinding: the Host must name a loopback address (or the bound host). */
export function hostAllowed(host: string | undefined, boundHost: string): boolean {
  if (!host) return true;
  const h = host.replace(/:\d+$/, '').replace(/^\[|\]$/g, '').toLowerCase();
  return h === 'localhost' || h === '127.0.0.1' || h === '::1' || h === boundHost.toLowerCase() || boundHost === '0.0.0.0' || boundHost === '::';
}

/**
 * The host part of the URL a client dials for a server bound to `host`: a wildcard bind (0.0.0.0,
 * ::) listens on loopback too, so the URL names loopback; an IPv6 address goes in brackets.
 */
export function urlHost(host: string): string {
  const dial = host === '0.0.0.0' ? '127.0.0.1' : host === '::' ? '::1' : host;
  return dial.includes(':') ? `[${dial}]` : dial;
}
