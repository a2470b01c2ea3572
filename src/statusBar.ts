// The status-bar item: stopped / starting / running on host:port / crashed. A click starts or stops.
import * as vscode from 'vscode';
import type { Snapshot } from './core/lifecycle';
import { statusText } from './core/statusText';

export class StatusBar implements vscode.Disposable {
  private readonly item = vscode.window.createStatusBarItem('quayside.status', vscode.StatusBarAlignment.Left, 50);
  private ticker: NodeJS.Timeout | undefined;
  private last: Snapshot | undefined;

  /** `attachUrl`: quayside.url when set (the extension attaches to that emulator instead of starting one). */
  constructor(private readonly attachUrl: () => string | undefined) {
    this.item.name = 'Quayside';
    this.item.command = 'quayside.toggle';
    this.item.show();
  }

  update(s: Snapshot): void {
    this.last = s;
    const t = statusText(s, Date.now(), this.attachUrl());
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
