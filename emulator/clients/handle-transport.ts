import { QuaysideError } from '../errors';
import type { OpArgs, OpName, OpResult, ServerEvent } from '../protocol';
import { abortError, whenAborted } from './abort';
import { mayBeHeld } from './slots';
import type { RequestOptions, Transport } from './transport';

const handleClosed = () => new QuaysideError('unavailable', 'this queue handle was closed');

/**
 * One handle's view of a transport it shares with others (the in-memory engine's session, or a
 * connection the caller passed in). close() cancels the handle's calls still waiting (a held recv
 * is cancelled in the engine, so it leases nothing) and fails them, and later ones, with
 * `unavailable`; a call on its way that may change state gets its own answer. The shared transport
 * stays open and the other handles go on.
 */
export class HandleTransport implements Transport {
  private closed = false;
  private readonly calls = new Set<AbortController>();

  constructor(private readonly shared: Transport) {}

  async request<K extends OpName>(op: K, args: OpArgs<K>, opts: RequestOptions = {}): Promise<OpResult<K>> {
    if (this.closed) throw handleClosed();
    const outer = opts.signal;
    if (outer?.aborted) throw abortError(outer);
    const ac = new AbortController();
    const stopListening = outer ? whenAborted(outer, () => ac.abort(outer.reason)) : undefined;
    // close() ends a call that may wait (a held pull), and any call not yet sent (waiting for a
    // connection); a send or an ack on its way may be applied, so it is left to its own answer.
    const held = mayBeHeld(op, args);
    this.calls.add(ac);
    const onSent = held ? undefined : () => this.calls.delete(ac);
    try {
      return await this.shared.request(op, args, { signal: ac.signal, onSent });
    } catch (e) {
      if (this.closed && ac.signal.aborted && !outer?.aborted) throw handleClosed();
      throw e;
    } finally {
      this.calls.delete(ac);
      stopListening?.();
    }
  }

  onEvent(listener: (event: ServerEvent) => void): () => void {
    return this.shared.onEvent(listener);
  }

  onReconnect(listener: () => void): () => void {
    return this.shared.onReconnect(listener);
  }

  onReconnectFailed(listener: (error: unknown) => void): () => void {
    return this.shared.onReconnectFailed?.(listener) ?? (() => {});
  }

  isClosed(): boolean {
    return this.closed || (this.shared.isClosed?.() ?? false);
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const ac of this.calls) ac.abort();
  }
}
