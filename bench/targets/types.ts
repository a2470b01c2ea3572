import type { Sample } from '../lib';

/** One queue system the bench measures: Quayside or a peer. */
export interface QueueTarget {
  /** Short id used in results: quayside, bullmq-mem, bullmq-aof, azurite, pgboss. */
  id: string;
  /** Human label for the table. */
  label: string;
  /** What it promises about an acknowledged write, said in the table. */
  durability: string;
  /** Versions of what ran (package and server). */
  versions: Record<string, string>;
  /** Has a batch-produce call (Azurite has none). */
  batch: boolean;
  /** What "consume and ack" means for this target (pull 10 + ack, a worker, …). */
  consumeNote: string;
  start(): Promise<void>;
  stop(): Promise<void>;
  /** A fresh queue (or an existing one when `fresh` is false). */
  queue(name: string, fresh?: boolean): Promise<QueueClient>;
  /** The server process, for RSS; null when it runs inside the bench. */
  serverPid(): number | null;
  /** The server is a tree of processes (its memory is theirs summed, see serverMemory). */
  readonly processTree?: boolean;
}

export interface QueueClient {
  push(body: unknown): Promise<void>;
  pushBatch(bodies: unknown[]): Promise<void>;
  /** Fills the queue with n messages (bodies from index `from`) the fastest way the target has. */
  preload(n: number, from?: number): Promise<void>;
  /** Consumes and acks n messages with `consumers` concurrent consumers; times only the consuming. */
  consume(n: number, consumers: number): Promise<Sample>;
  /** Live messages in the queue (best effort; -1 if unknown). */
  depth(): Promise<number>;
  /** Deletes the queue and its messages. */
  drop(): Promise<void>;
}
