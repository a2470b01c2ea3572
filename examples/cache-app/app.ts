// A small email service on the cache dialect: sign-ups enqueue a welcome email (deduplicated per
// address), a worker sends them.
import { createCache, type Cache } from 'quayside/cache';

export interface Email {
  to: string;
  template: string;
}

export interface Mailer {
  send(to: string, template: string): Promise<void>;
}

export function emailService(cache: Cache) {
  const q = cache.queue<Email>('emails');
  return {
    /** Safe to call twice: the dedupe key makes a repeat sign-up enqueue nothing. */
    signup: (email: string) => q.push({ to: email, template: 'welcome' }, { dedupeKey: `welcome:${email}` }),
    /** Runs until the signal aborts; a mailer that throws gets the message retried, then dead-lettered. */
    worker: (mailer: Mailer, signal: AbortSignal) =>
      q.consume(async (msg) => {
        const { to, template } = msg.body;
        await mailer.send(to, template);
      }, { max: 10, visibilitySeconds: 30, idleMs: 1000, signal }),
    failed: () => q.deadLetters({ limit: 50 }),
    retryFailed: () => q.replay(),
  };
}

/** Wiring for production: QUAYSIDE_URL / QUAYSIDE_TOKEN point it at an emulator locally. */
export const fromEnvironment = () => emailService(createCache({ namespace: process.env.APP_NAMESPACE ?? 'app' }));
