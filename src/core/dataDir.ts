// Where the emulator keeps its data. No VS Code here: the folders come in as paths.
import * as path from 'path';

/**
 * The `quayside.dataDir` setting made absolute: empty means `.quayside/` in the first workspace
 * folder; relative paths start from that folder. With no folder open, both use the extension's
 * global storage instead of the extension's own directory, which an update replaces and which may
 * be read-only.
 */
export function resolveDataDir(setting: string, folder: string | undefined, globalStorage: string): string {
  const dir = setting.trim();
  const base = folder ?? globalStorage;
  if (!dir) return path.join(base, '.quayside');
  return path.isAbsolute(dir) ? dir : path.resolve(base, dir);
}
