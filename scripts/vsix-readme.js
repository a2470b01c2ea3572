#!/usr/bin/env node
// Writes dist/vsix-README.md, the README packaged in the .vsix: docs/extension.md without its
// pictures and with links to other repository files turned into plain text. vsce refuses relative
// image links in a package that names no repository, and the pictures are not in the .vsix.
'use strict';
const fs = require('node:fs');
const path = require('node:path');

const root = path.resolve(__dirname, '..');
const src = fs.readFileSync(path.join(root, 'docs', 'extension.md'), 'utf8');
const out = src
  .split('\n')
  .filter((line) => !/^\s*!\[[^\]]*\]\([^)]*\)\s*$/.test(line))
  .join('\n')
  .replace(/!\[[^\]]*\]\((?!https?:)[^)]*\)/g, '')
  .replace(/\[([^\]]+)\]\((?!https?:|#)[^)]*\)/g, '$1');
fs.mkdirSync(path.join(root, 'dist'), { recursive: true });
fs.writeFileSync(path.join(root, 'dist', 'vsix-README.md'), out);
console.log('[vsix-readme] dist/vsix-README.md');
