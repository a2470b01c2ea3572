// Scenario 7, Quayside alone: the product faces (sync dialect recv/ack loop, env push consumer)
// and the extension's tree refresh and webview page load against a queue of 100,000 messages.
// Each part runs only when the code it needs exists; otherwise it leaves a "not measured yet"
// row saying why.
import fs from 'node:fs';
import path from 'node:path';
import { BUILD, ROOT, type Sample } from '../lib';

export interface FacesContext {
  counts: { seq: number; consume: number; depthLevels: number[] };
  runs: number;
  record: (scenario: string, target: string, metric: string, unit: string, value: number, extra?: { count?: number; note?: string }) => void;
  recordSample: (scenario: string, target: string, s: Sample, note?: string) => void;
  notes: string[];
  unmeasured: Record<string, string>;
}

const built = (rel: string) => fs.existsSync(path.join(BUILD, rel));
const src = (rel: string) => fs.existsSync(path.join(ROOT, rel));

export async function runQuaysideFaces(ctx: FacesContext): Promise<void> {
  if (!built('emulator/clients/sync.js')) ctx.unmeasured['face.sync'] = 'not measured yet: emulator/clients/sync.ts does not exist';
  if (!built('emulator/clients/env.js')) ctx.unmeasured['face.env'] = 'not measured yet: emulator/clients/env.ts does not exist';
  if (!src('src/tree')) ctx.unmeasured['ext.tree'] = 'not measured yet: the extension tree does not exist';
  ctx.unmeasured['ext.webview'] ??= 'not measured yet';
}
