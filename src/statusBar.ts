// The status-bar item: stopped / starting / running on host:port / crashed. A click starts or stops.
import * as vscode from 'vscode';
import type { Snapshot } from './core/lifecycle';

export function statusText(s: Snapshot, now = Date.now()): { text: string; tooltip: string; warning: boolean } {
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
      return {
        text: `$(error) Quayside: crashed${wait !== undefined ? ` (restart in ${wait}s)` : ''}`,
        tooltip: `${s.error?.message ?? 'The Quayside emulator crashed'}\nClick to start it now`,
        warning: true,
      };
    }
  }
}

export class StatusBar implements vscode.Disposable {
  private readonly item = vscode.window.createStatusBarItem('quayside.status', vscode.StatusBarAlignment.Left, 50);
  private ticker: NodeJS.Timeout | undefined;
  private last: Snapshot | undefined;

  constructor() {
    this.item.name = 'Quayside';
    this.item.command = 'quayside.toggle';
    this.item.show();
  }

  update(s: Snapshot): void {
    this.last = s;
    const t = statusText(s);
    this.item.text = t.text;
    this.item.tooltip = t.tooltip;
    this.item.backgroundColor = t.warning && s.state === 'crashed' ? new vscode.ThemeColor('statusBarItem.errorBackground') : undefined;
    // Count down to the next restart.
    if (s.state === 'crashed' && s.restartAt && !this.ticker) {
      this.ticker = setInterval(() => this.last && this.update(this.last), 1000);
    } else if ((s.state !== 'crashed' || !s.restartAt) && this.ticker) {
      clearInterval(this.ticker);
      this.ticker = undefined;
    }
  }

  dispose(): void {
    if (this.ticker) clearInterval(this.ticker);
    this.item.dispose();
  }
}
