#!/usr/bin/env node
// Bundles the queue panel's webview script: src/panel/webview/main.ts -> media/panel/dist/panel.js.
// One IIFE for the browser, no eval, no external imports (the webview's CSP allows only this file).
// Usage: node scripts/build-panel.js [--watch] [--minify]
'use strict';
const path = require('node:path');

const root = path.resolve(__dirname, '..');

function options({ outfile = path.join(root, 'media/panel/dist/panel.js'), minify = false } = {}) {
  return {
    entryPoints: [path.join(root, 'src/panel/webview/main.ts')],
    outfile,
    bundle: true,
    format: 'iife',
    platform: 'browser',
    target: ['chrome114'],
    sourcemap: minify ? false : 'linked',
    minify,
    legalComments: 'none',
    logLevel: 'warning',
  };
}

/** Build once; resolves to the output file. */
async function buildPanel(opts = {}) {
  const esbuild = require('esbuild');
  const o = options(opts);
  await esbuild.build(o);
  return o.outfile;
}

module.exports = { buildPanel, options };

if (require.main === module) {
  const args = process.argv.slice(2);
  const minify = args.includes('--minify');
  if (args.includes('--watch')) {
    require('esbuild')
      .context(options({ minify }))
      .then((ctx) => ctx.watch())
      .then(() => console.log('[build-panel] watching src/panel/webview'));
  } else {
    buildPanel({ minify }).then(
      (out) => console.log(`[build-panel] ${path.relative(root, out)}`),
      (e) => {
        console.error(e.message || e);
        process.exit(1);
      },
    );
  }
}
