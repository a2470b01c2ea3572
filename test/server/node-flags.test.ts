import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { EMULATOR_NODE_FLAGS } from '../../emulator/node-flags';

const ROOT = path.join(__dirname, '..', '..');

describe('the flags the emulator process runs with', () => {
  it('`npm start` passes exactly EMULATOR_NODE_FLAGS (the extension passes them through cliArgs); the bin\'s shebang is plain, as every env runs it', () => {
    const shebang = fs.readFileSync(path.join(ROOT, 'emulator', 'cli.ts'), 'utf8').split('\n')[0];
    // `env -S node <flags>` fails where env has no -S (BusyBox on Alpine, the BSDs).
    assert.equal(shebang, '#!/usr/bin/env node');
    const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
    assert.equal(pkg.scripts.start, `node ${EMULATOR_NODE_FLAGS.join(' ')} dist/emulator/cli.js start`);
  });

  it('are flags this Node accepts and applies (the young generation stays at 4 MiB a semi-space)', () => {
    const probe = "const v8=require('v8');let k=[];for(let i=0;i<2e6;i++){k.push({i});if(k.length>5e4)k=[]}" +
      "process.stdout.write(String(v8.getHeapSpaceStatistics().find(s=>s.space_name==='new_space').space_size))";
    const r = spawnSync(process.execPath, [...EMULATOR_NODE_FLAGS, '-e', probe], { encoding: 'utf8', timeout: 30_000 });
    assert.equal(r.status, 0, r.stderr);
    assert.ok(Number(r.stdout) <= 8 * 1024 * 1024, `new space ${r.stdout} bytes`);
  });
});
