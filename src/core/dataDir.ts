// Where the emulator keeps its data. No VS Code here: the folders come in as paths.
import * as os from 'os';
import * as path from 'path';

/**
 * The `quayside.dataDir` setting made absolute: empty means `.quayside/` in the first workspace
 * folder; relative paths start from that folder. With no folder open, both use the extension's
 * global storage instead of the extension's own directory, which an update replaces and which may
 * be read-only. `${workspaceFolder}` is that folder (as in VS Code's own settings), a leading `~` the
 * home directory.
 */
export function resolveDataDir(setting: string, folder: string | undefined, globalStorage: string, home = os.homedir()): string {
  const base = folder ?? globalStorage;
  const dir = setting
    .trim()
    .replace(/\$\{workspaceFolder\}/g, () => base)
    .replace(/^~(?=$|[\\/])/, () => home);
  if (!dir) return path.join(base, '.quayside');
  return path.isAbsolute(dir) ? dir : path.resolve(base, dir);
}
