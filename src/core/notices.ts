// When the extension pops up a notice about the emulator's settings and start: pure, so it is
// unit-tested; extension.ts shows what these say to show.

/**
 * "Restart the emulator to apply …": asked when a setting that applies changes under a running
 * emulator, and once it runs when one changed while it started (that start read the old one). It
 * remembers what it last named, so a crash restart on the old settings does not ask again, and
 * forgets it at a stop (the next start reads the settings afresh).
 */
export class RestartQuestion {
  private asked = '';

  /** `pending`: the settings a restart would apply (EmulatorService.pendingSettings). */
  constructor(private readonly pending: () => string[]) {}

  /**
   * Settings changed while it runs (`touched`: ConfigurationChangeEvent.affectsConfiguration): the
   * settings to name, or none. A change of another setting (autoStart) does not ask again about one
   * still pending.
   */
  settingsChanged(touched: (key: string) => boolean): string[] {
    const changed = this.pending();
    if (!changed.some(touched)) return [];
    this.asked = changed.join(', ');
    return changed;
  }

  /** The lifecycle reached `state`: the settings to name, or none. */
  stateChanged(state: string): string[] {
    if (state === 'stopped') this.asked = '';
    if (state !== 'running') return [];
    const changed = this.pending();
    const key = changed.join(', ');
    if (key === this.asked) return [];
    this.asked = key;
    return changed;
  }
}

/**
 * A warning the emulator gave as it started, popped up once: the same warning again (an automatic
 * restart on the same data, "52 min ahead" become "53 min ahead") is in the log only. A stop
 * forgets it, so the warning of a later start is new news.
 */
export class WarningOnce {
  private last: string | undefined;

  /** Whether to pop `message` up. */
  show(message: string): boolean {
    const shape = message.replace(/\d+(\.\d+)?/g, '#'); // the words, not the figures
    if (shape === this.last) return false;
    this.last = shape;
    return true;
  }

  stateChanged(state: string): void {
    if (state === 'stopped') this.last = undefined;
  }
}
