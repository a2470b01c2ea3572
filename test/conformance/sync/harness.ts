import * as remote from '../../../emulator/clients/sync';
import * as memory from '../../../emulator/embedded/memory';
import type { SyncQueue, SyncQueueOptions } from '../../../emulator/clients/sync-face';
import { START, startTestEmulator } from '../support';

// The two ways to run the sync face, so every sync conformance file runs the same test bodies
// against quayside/sync (the emulator) and quayside/sync/memory (in-process), on a virtual clock.

export interface Harness {
  name: string;
  queue(o: SyncQueueOptions): SyncQueue;
  advance(ms: number): Promise<number>;
  now(): number;
  close(): Promise<void>;
}

export const variants: { name: string; make: () => Promise<Harness> }[] = [
  {
    name: 'quayside/sync (emulator)',
    async make() {
      const emu = await startTestEmulator();
      const made: SyncQueue[] = [];
      return {
        name: 'emulator',
        queue: (o) => {
          const q = remote.queue({ ...o, url: emu.url, token: emu.token });
          made.push(q);
          return q;
        },
        advance: (ms) => emu.clock.advance(ms),
        now: () => emu.clock.now(),
        async close() {
          for (const q of made) await q.close();
          await emu.close();
        },
      };
    },
  },
  {
    name: 'quayside/sync/memory (in-process)',
    async make() {
      const mem = memory.createMemoryQueues({ clock: { start: START } });
      return { name: 'memory', queue: (o) => mem.queue(o), advance: (ms) => mem.clock.advance(ms), now: () => mem.clock.now(), close: () => mem.close() };
    },
  },
];
