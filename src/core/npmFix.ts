// The npm commands the native-module fixes run in a terminal. No VS Code here, so what they would
// run (where, under which Node) is unit-tested.
import * as path from 'path';

export type NpmFixKind = 'install' | 'rebuild';

export interface NpmFix {
  /** The terminal's name: says which Node the module is built for. */
  name: string;
  /** Where to run it; undefined: no folder is open. */
  cwd: string | undefined;
  /** Added to the terminal's environment: PATH with the configured Node's directory first. */
  env: Record<string, string>;
  /** Sent one after another: the first shows which node the shell really runs. */
  lines: string[];
  /** `npm i` in a folder without package.json would create one. */
  createsPackageJson: boolean;
}

export function npmFix(o: {
  kind: NpmFixKind;
  /** The resolved Node the emulator ran under (absolute), if known. */
  nodePath?: string;
  /** The workspace folder whose copy failed; else the first folder. */
  folder?: string;
  workspaceFolders: readonly string[];
  env: Record<string, string | undefined>;
  platform?: string;
  exists: (p: string) => boolean;
}): NpmFix {
  const win = (o.platform ?? process.platform) === 'win32';
  const p = win ? path.win32 : path.posix;
  const cwd = o.folder ?? o.workspaceFolders[0];
  const node = o.nodePath && p.isAbsolute(o.nodePath) ? o.nodePath : undefined;
  const env: Record<string, string> = {};
  if (node) {
    // npm's `#!/usr/bin/env node`, node-gyp and prebuild-install all take the first node on PATH.
    const key = win ? (Object.keys(o.env).find((k) => k.toUpperCase() === 'PATH') ?? 'Path') : 'PATH';
    const rest = o.env[key] ?? '';
    env[key] = rest ? `${p.dirname(node)}${p.delimiter}${rest}` : p.dirname(node);
  }
  const command = o.kind === 'install' ? 'npm i -D quayside' : 'npm rebuild better-sqlite3';
  return {
    name: `Quayside: ${command} (for ${node ?? 'the node on PATH'})`,
    cwd,
    env,
    lines: ['node --version', command],
    createsPackageJson: o.kind === 'install' && cwd !== undefined && !o.exists(p.join(cwd, 'package.json')),
  };
}
