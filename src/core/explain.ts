// What to tell the user when the emulator does not start, and which fixes to offer.
// Plain data, so the wording is unit-tested; the extension turns actions into buttons.

import { capital } from './wording';

export type FixAction =
  | 'installWorkspace' // run `npm i -D quayside` in the workspace
  | 'rebuildWorkspace' // run `npm rebuild better-sqlite3` in the folder whose copy failed
  | 'setNodePath' // open the quayside.nodePath setting
  | 'useFreePort' // start again on a free port
  | 'changePort' // open the quayside.port setting
  | 'attachRunning' // attach to the emulator on the taken port (npm start's): ask its url and token
  | 'openSettings' // the Quayside settings
  | 'showLog' // the output channel
  | 'retry';

export interface Explanation {
  message: string;
  actions: FixAction[];
}

export interface FailureContext {
  /** Which emulator copy ran ('workspace' | 'packaged' | 'attached'). */
  source?: string;
  nodePath?: string;
  /** The workspace folder whose copy ran (source 'workspace'). */
  folder?: string;
  port?: number;
  url?: string;
}

export function explainFailure(f: { code: string; message: string }, ctx: FailureContext = {}): Explanation {
  switch (f.code) {
    case 'node_not_found':
      // A path that is not there: PATH has nothing to do with it.
      if (ctx.nodePath && /[\\/]/.test(ctx.nodePath)) {
        return {
          message: `"quayside.nodePath" is set to ${ctx.nodePath}, and no Node.js is there (${f.message}). Set it to the full path of Node.js 20 or newer, or clear it to use the \`node\` on PATH.`,
          actions: ['setNodePath', 'showLog'],
        };
      }
      return {
        message: `Quayside runs its emulator under Node.js, and none was found (${f.message}). Install Node.js 20 or newer and make sure \`node\` is on PATH, or set "quayside.nodePath" to its full path.`,
        actions: ['setNodePath', 'showLog'],
      };
    case 'node_too_old':
      return { message: `${capital(f.message)}. Set "quayside.nodePath" to a newer Node.js.`, actions: ['setNodePath'] };
    case 'emulator_not_found':
      return {
        message: `No Quayside emulator was found: ${f.message}. Run \`npm i -D quayside\` in your workspace, or reinstall the extension.`,
        actions: ['installWorkspace', 'showLog'],
      };
    case 'native_module':
      if (ctx.source === 'workspace') {
        return {
          message: `The workspace's quayside could not load its native SQLite module under ${ctx.nodePath ?? 'node'}: ${stripFix(f.message)}. Rebuild it for this Node (\`npm rebuild better-sqlite3\` in ${ctx.folder ?? 'the workspace folder'}), or set "quayside.nodePath" to the Node your project uses.`,
          actions: ['rebuildWorkspace', 'setNodePath', 'showLog'],
        };
      }
      return {
        message: `The emulator packaged with the extension could not load its native SQLite module under ${ctx.nodePath ?? 'node'}: ${stripFix(f.message)}. Fix: run \`npm i -D quayside\` in your workspace (it builds for your Node), or set "quayside.nodePath" to a Node it was built for.`,
        actions: ['installWorkspace', 'setNodePath', 'showLog'],
      };
    case 'port_in_use':
      return {
        message: `Port ${ctx.port ?? ''} is already in use, so the emulator cannot listen there. If it is an emulator you started (\`npm start\`, \`quayside start\`), attach to it with the token it printed; otherwise start on a free port, or change "quayside.port".`.replace('Port  is', 'The port is'),
        actions: ['attachRunning', 'useFreePort', 'changePort'],
      };
    case 'bad_port':
      return { message: `${f.message}. Set it to a free port, or to 0 for one the system picks.`, actions: ['changePort'] };
    case 'config':
      // The CLI read the workspace's quayside.json at start, and the file itself is what is wrong: Retry alone fails the same way.
      return { message: `The workspace's quayside.json could not be applied, so the emulator did not start: ${f.message}. Fix the file (it is read at each start), then Retry.`, actions: ['showLog', 'retry'] };
    case 'data_dir':
      return { message: `The emulator cannot use its data directory: ${f.message}. Check "quayside.dataDir".`, actions: ['openSettings', 'showLog'] };
    case 'attach_failed':
      return { message: `${capital(f.message)}. Check "quayside.url", or clear it to let the extension start its own emulator.`, actions: ['openSettings', 'retry'] };
    case 'unauthorized':
      return { message: `${capital(f.message)}. Set "quayside.token" to the emulator's read-write token.`, actions: ['openSettings'] };
    case 'crashed':
      if (ctx.source === 'attached') {
        // Not our process: nothing of it is in our output, and it may just be stopped or paused.
        return {
          message: `${capital(f.message)}. It stopped answering: it was stopped, or it is paused (at a breakpoint, say). Start it again, or check "quayside.url", then Retry.`,
          actions: ['retry', 'openSettings'],
        };
      }
      return { message: `${capital(f.message)}. The Quayside output has what it printed; fix the cause, then start it again.`, actions: ['retry', 'showLog'] };
    case 'timeout':
      return { message: `${capital(f.message)}. See the Quayside output for what it printed.`, actions: ['showLog', 'retry'] };
    default:
      return { message: `The Quayside emulator did not start: ${f.message}`, actions: ['showLog', 'retry'] };
  }
}

/** The CLI's native_module message already carries a "Fix: …" tail; we say it our way. */
function stripFix(s: string): string {
  return s.replace(/\s*Fix:.*$/s, '').replace(/\.$/, '');
}

/**
 * Whether a fix picked from an error toast still makes sense now. VS Code cannot close a toast
 * (microsoft/vscode#50232), so one may be picked long after a later start succeeded: starting again
 * then would restart (or replace) an emulator that runs.
 */
export function fixStillApplies(action: FixAction, state: string): boolean {
  const starts = action === 'retry' || action === 'useFreePort';
  return !(starts && (state === 'running' || state === 'starting'));
}

/**
 * The command that opens the Settings editor on `key` where it can be set. A machine-overridable
 * setting (quayside.nodePath) is not listed on the User tab of a remote window, so: the Workspace
 * tab when a folder is open, else the Remote tab in a remote window, else User.
 */
export function settingsCommand(key: string, o: { folderOpen: boolean; remote: boolean }): { command: string; args: unknown[] } {
  if (o.folderOpen) return { command: 'workbench.action.openWorkspaceSettings', args: [{ query: key }] };
  if (o.remote) return { command: 'workbench.action.openRemoteSettings', args: [{ query: key }] };
  return { command: 'workbench.action.openSettings', args: [key] };
}
