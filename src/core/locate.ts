// Which emulator to run and under which node: no VS Code here, the file system comes in as a function.
import * as path from 'path';

export type EmulatorSource = 'workspace' | 'packaged';

export interface EmulatorCandidate {
  source: EmulatorSource;
  /** The CLI entry, `…/dist/emulator/cli.js`. */
  cliPath: string;
  /** The package root that holds it (its node_modules carry better-sqlite3). */
  root: string;
  /** The workspace folder, for the workspace copy. */
  folder?: string;
}

export const CLI_RELATIVE = path.join('dist', 'emulator', 'cli.js');

/** Candidates in the order they are tried: each workspace folder's own copy, then the packaged one. */
export function emulatorCandidates(opts: { workspaceFolders: readonly string[]; extensionPath: string }): EmulatorCandidate[] {
  const out: EmulatorCandidate[] = [];
  for (const folder of opts.workspaceFolders) {
    const root = path.join(folder, 'node_modules', 'quayside');
    out.push({ source: 'workspace', cliPath: path.join(root, CLI_RELATIVE), root, folder });
  }
  out.push({ source: 'packaged', cliPath: path.join(opts.extensionPath, CLI_RELATIVE), root: opts.extensionPath });
  return out;
}

export interface Located {
  found?: EmulatorCandidate;
  /** Every path looked at, in order (for the "not found" message). */
  tried: string[];
}

export function locateEmulator(opts: {
  workspaceFolders: readonly string[];
  extensionPath: string;
  exists: (p: string) => boolean;
}): Located {
  const tried: string[] = [];
  for (const c of emulatorCandidates(opts)) {
    tried.push(c.cliPath);
    if (opts.exists(c.cliPath)) return { found: c, tried };
  }
  return { tried };
}

/**
 * The node binary to run: `nodePath` as given when it is a path, otherwise looked up on PATH.
 * Undefined when there is none.
 */
export function resolveNode(opts: {
  nodePath: string;
  env: Record<string, string | undefined>;
  platform?: string;
  exists: (p: string) => boolean;
}): string | undefined {
  const platform = opts.platform ?? process.platform;
  const name = opts.nodePath.trim() || 'node';
  const p = platform === 'win32' ? path.win32 : path.posix;
  if (name.includes('/') || name.includes('\\')) return opts.exists(name) ? name : undefined;
  const pathVar = opts.env.PATH ?? opts.env.Path ?? '';
  const exts = platform === 'win32' ? (opts.env.PATHEXT ?? '.EXE;.CMD;.BAT').split(';').filter(Boolean) : [''];
  for (const dir of pathVar.split(platform === 'win32' ? ';' : ':')) {
    if (!dir) continue;
    for (const ext of exts) {
      const candidate = p.join(dir, name.toLowerCase().endsWith(ext.toLowerCase()) ? name : name + ext);
      if (opts.exists(candidate)) return candidate;
    }
  }
  return undefined;
}

/** `v20.11.1` → 20; undefined when it is not a Node version string. */
export function nodeMajor(version: string): number | undefined {
  const m = /^v?(\d+)\./.exec(version.trim());
  return m ? Number(m[1]) : undefined;
}

export const MIN_NODE_MAJOR = 20;
