// The extension's settings, read fresh on every start.
import * as path from 'path';
import * as vscode from 'vscode';
import type { EmulatorConfig } from './core/service';

export const SECTION = 'quayside';

export function workspaceFolders(): string[] {
  return (vscode.workspace.workspaceFolders ?? []).filter((f) => f.uri.scheme === 'file').map((f) => f.uri.fsPath);
}

export function readConfig(extensionPath: string): EmulatorConfig {
  const c = vscode.workspace.getConfiguration(SECTION);
  const folders = workspaceFolders();
  const base = folders[0];
  let dataDir = (c.get<string>('dataDir') ?? '').trim();
  const memory = c.get<boolean>('inMemory') ?? false;
  if (!dataDir) dataDir = base ? path.join(base, '.quayside') : path.join(extensionPath, '.quayside');
  else if (!path.isAbsolute(dataDir)) dataDir = path.resolve(base ?? extensionPath, dataDir);
  const clock = c.get<string>('clock') === 'virtual' ? 'virtual' : 'system';
  const port = c.get<number>('port');
  return {
    url: (c.get<string>('url') ?? '').trim(),
    token: (c.get<string>('token') ?? '').trim(),
    nodePath: (c.get<string>('nodePath') ?? '').trim() || 'node',
    port: typeof port === 'number' && Number.isInteger(port) && port >= 0 && port < 65536 ? port : 7433,
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
