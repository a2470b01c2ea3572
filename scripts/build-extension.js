#!/usr/bin/env node
// Bundles the extension (src/extension.ts -> dist/extension.js) and, with --tests, the in-host test
// suite (test/extension/host/*.ts -> dist/test/extension/host/*.js, one file per test file).
// `vscode` is external; native modules are never bundled, and the build fails if the extension
// bundle pulls in better-sqlite3, the engine or the store (it talks to the emulator over WebSocket only).
// Usage: node scripts/build-extension.js [--tests] [--minify] [--watch]
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const esbuild = require('esbuild');

const root = path.resolve(__dirname, '..');
const args = new Set(process.argv.slice(2));
// ws's optional native speed-ups; it works without them.
const NATIVE = ['better-sqlite3', 'bufferutil', 'utf-8-validate'];
const FORBIDDEN = [/node_modules[\\/]better-sqlite3/, /^emulator[\\/](engine|store|server|http|embedded)[\\/]/];

async function buildExtension() {
  const result = await esbuild.build({
    entryPoints: [path.join(root, 'src/extension.ts')],
    outfile: path.join(root, 'dist/extension.js'),
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: 'node18',
    external: ['vscode', ...NATIVE],
    sourcemap: args.has('--minify') ? false : 'linked',
    minify: args.has('--minify'),
    metafile: true,
    logLevel: 'warning',
    // Input paths in the metafile are relative to this, which FORBIDDEN's patterns rely on
    // (from another working directory they would read ../../…/emulator/… and never match).
    absWorkingDir: root,
  });
  const inputs = Object.keys(result.metafile.inputs);
  const bad = inputs.filter((i) => FORBIDDEN.some((re) => re.test(i)));
  if (bad.length) throw new Error(`the extension bundle must not contain: ${bad.join(', ')}`);
  return 'dist/extension.js';
}

async function buildTests() {
  const dir = path.join(root, 'test/extension/host');
  const entries = fs.readdirSync(dir).filter((f) => f.endsWith('.ts')).map((f) => path.join(dir, f));
  await esbuild.build({
    entryPoints: entries,
    outdir: path.join(root, 'dist/test/extension/host'),
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: 'node18',
    external: ['vscode', 'mocha', ...NATIVE],
    sourcemap: 'inline',
    logLevel: 'warning',
  });
  return `${entries.length} files to dist/test/extension/host`;
}

(async () => {
  const out = [await buildExtension()];
  if (args.has('--tests')) out.push(await buildTests());
  console.log(`built ${out.join('; ')}`);
})().catch((e) => {
  console.error(e.message || e);
  process.exit(1);
});
