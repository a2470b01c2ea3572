// The extension's settings, read fresh on every start.
import * as vscode from 'vscode';
import { resolveDataDir } from './core/dataDir';
import type { EmulatorConfig } from './core/service';

export const SECTION = 'quayside';

export function workspaceFolders(): string[] {
  return (vscode.workspace.workspaceFolders ?? []).filter((f) => f.uri.scheme === 'file').map((f) => f.uri.fsPath);
}

/** `globalStoragePath`: the extension's global storage (context.globalStorageUri), for data with no folder open. */
export function readConfig(extensionPath: string, globalStoragePath: string): EmulatorConfig {
  const c = vscode.workspace.getConfiguration(SECTION);
  const folders = workspaceFolders();
  const base = folders[0];
  const dataDir = resolveDataDir(c.get<string>('dataDir') ?? '', base, globalStoragePath);
  const memory = c.get<boolean>('inMemory') ?? false;
  const clock = c.get<string>('clock') === 'virtual' ? 'virtual' : 'system';
  const port = c.get<number>('port');
  return {
    url: (c.get<string>('url') ?? '').trim(),
    token: (c.get<string>('token') ?? '').trim(),
    nodePath: (c.get<string>('nodePath') ?? '').trim() || 'node',
    // As set, even out of range: a start refuses a bad port by name (bad_port) rather than use another.
    port: typeof port === 'number' ? port : port === undefined || port === null ? 7433 : NaN,
    host: '127.0.0.1',
    dataDir,
    memory,
    clock,
    restartOnCrash: c.get<boolean>('restartOnCrash') ?? true,
    workspaceFolders: folders,
    extensionPath,
    env: process.env,
    cwd: base,
  };
}
