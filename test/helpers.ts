import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import v8 from 'node:v8';
import vm from 'node:vm';
import { Engine, type ChangeBody } from '../emulator/engine/engine';
import { VirtualClock } from '../emulator/engine/clock';
import { Store } from '../emulator/store/store';
import { QuaysideError } from '../emulator/errors';

/** An engine on an in-memory (or given) store and a virtual clock starting at a fixed instant. */
export function makeEngine(opts: { dataDir?: string; start?: number; dailyQuota?: number | null } = {}) {
  const clock = new VirtualClock(opts.start ?? Date.UTC(2026, 0, 5, 10, 0, 0));
  const store = new Store({ dataDir: opts.dataDir ?? null });
  const engine = new Engine({ store, clock, dailyQuota: opts.dailyQuota ?? null });
  const events: ChangeBody[] = [];
  engine.onChange((e) => events.push(e));
  return {
    engine, clock, store, events,
    advance: (ms: number) => engine.advance(ms),
    async close() {
      await engine.close();
      store.close();
    },
  };
}

export function tempDir(prefix = 'quayside-test-'): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}

/** Resolves to the QuaysideError a promise rejects with (fails if it resolves). */
export async function rejects(p: Promise<unknown>): Promise<QuaysideError> {
  try {
    await p;
  } catch (e) {
    if (e instanceof QuaysideError) return e;
    throw e;
  }
  throw new Error('expected the call to fail, but it succeeded');
}

export const SECOND = 1000;
export const MINUTE = 60 * SECOND;
export const HOUR = 60 * MINUTE;
export const DAY = 24 * HOUR;

/** Forces a full garbage collection (mocha runs without --expose-gc). */
export function gc(): void {
  v8.setFlagsFromString('--expose-gc');
  (vm.runInNewContext('gc') as () => void)();
}
