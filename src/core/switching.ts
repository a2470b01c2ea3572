// A Transport that always speaks to the current emulator: the tree, the commands and the queue
// panels hold this one object, and it switches underneath when the emulator stops, restarts or
// is replaced. A switch to a new emulator counts as a reconnect (listeners re-subscribe).
import { QuaysideError } from '../../emulator/errors';
import type { OpArgs, OpName, OpResult, ServerEvent } from '../../emulator/protocol';
import type { RequestOptions, Transport } from '../../emulator/clients/transport';

export class SwitchingTransport implements Transport {
  private current: Transport | undefined;
  private detach: (() => void)[] = [];
  private readonly events = new Set<(e: ServerEvent) => void>();
  private readonly reconnects = new Set<() => void>();

  get connected(): Transport | undefined {
    return this.current;
  }

  /** Switch to `t` (or to nothing). */
  set(t: Transport | undefined): void {
    if (t === this.current) return;
    for (const d of this.detach.splice(0)) d();
    this.current = t;
    if (!t) return;
    this.detach.push(
      t.onEvent((e) => {
        for (const l of [...this.events]) l(e);
      }),
      t.onReconnect(() => this.fireReconnect()),
    );
    this.fireReconnect();
  }

  private fireReconnect(): void {
    for (const l of [...this.reconnects]) {
      try {
        l();
      } catch {
        /* ignore */
      }
    }
  }

  request<K extends OpName>(op: K, args: OpArgs<K>, opts?: RequestOptions): Promise<OpResult<K>> {
    const t = this.current;
    if (!t) return Promise.reject(new QuaysideError('unavailable', 'the Quayside emulator is not running'));
    return t.request(op, args, opts);
  }

  onEvent(listener: (event: ServerEvent) => void): () => void {
    this.events.add(listener);
    return () => this.events.delete(listener);
  }

  onReconnect(listener: () => void): () => void {
    this.reconnects.add(listener);
    return () => this.reconnects.delete(listener);
  }

  /** The owner closes the underlying connections; this only forgets them. */
  async close(): Promise<void> {
    this.set(undefined);
  }
}
