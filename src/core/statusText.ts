// The status-bar item's text and tooltip for each lifecycle state (pure, so it is unit-tested;
// statusBar.ts shows it).
import type { Snapshot } from './lifecycle';

export function statusText(s: Snapshot, now = Date.now(), attachUrl?: string): { text: string; tooltip: string; warning: boolean } {
  // With quayside.url set, stopped means detached: that emulator runs on its own.
  if (attachUrl && s.state === 'stopped' && !s.error) return { text: '$(debug-disconnect) Quayside: detached', tooltip: `Not attached to the emulator at ${attachUrl} (it runs on its own) — click to attach`, warning: false };
  if (attachUrl && s.state === 'starting') return { text: '$(sync~spin) Quayside: attaching…', tooltip: `Attaching to the emulator at ${attachUrl} — click to stop`, warning: false };
  if (attachUrl && s.state === 'stopping') return { text: '$(sync~spin) Quayside: detaching…', tooltip: `Detaching from the emulator at ${attachUrl} (it keeps running)`, warning: false };
  switch (s.state) {
    case 'stopped':
      return { text: '$(debug-stop) Quayside: stopped', tooltip: s.error ? `Quayside emulator stopped: ${s.error.message}\nClick to start` : 'Quayside emulator stopped — click to start', warning: !!s.error };
    case 'starting':
      return { text: '$(sync~spin) Quayside: starting…', tooltip: 'Starting the Quayside emulator — click to stop', warning: false };
    case 'running': {
      const ep = s.endpoint!;
      return {
        text: `$(pass-filled) Quayside: ${ep.host}:${ep.port}`,
        tooltip: `Quayside emulator ${ep.attached ? 'attached at' : 'running on'} ${ep.url}${ep.pid ? ` (pid ${ep.pid})` : ''}${ep.clock === 'virtual' ? ', virtual clock' : ''}\nClick to stop`,
        warning: false,
      };
    }
    case 'stopping':
      return { text: '$(sync~spin) Quayside: stopping…', tooltip: 'Stopping the Quayside emulator', warning: false };
    case 'crashed': {
      const wait = s.restartAt ? Math.max(0, Math.ceil((s.restartAt - now) / 1000)) : undefined;
      // An attached emulator is not restarted by us: we lost it, and attach again.
      if (attachUrl) {
        return {
          text: `$(error) Quayside: lost${wait !== undefined ? ` (attaching again in ${wait}s)` : ''}`,
          tooltip: `${s.error?.message ?? `Lost the emulator at ${attachUrl}`}\nClick to attach now`,
          warning: true,
        };
      }
      return {
        text: `$(error) Quayside: crashed${wait !== undefined ? ` (restart in ${wait}s)` : ''}`,
        tooltip: `${s.error?.message ?? 'The Quayside emulator crashed'}\nClick to start it now`,
        warning: true,
      };
    }
  }
}
