// The shape of bench/results/*.json, shared by run.ts (which fills it) and report.ts (which
// turns it into docs/benchmarks.md).

export interface Figure {
  /** Scenario key, e.g. `produce.seq`, `consume.16`, `consume.depth.1000000`, `ws.16`. */
  scenario: string;
  /** quayside, bullmq-mem, bullmq-aof, azurite, pgboss, or baseline. */
  target: string;
  /** rate, p50, p99, rss, ms, … */
  metric: string;
  unit: string;
  /** One value per run, in run order (run 1 first). */
  runs: number[];
  median: number;
  /** Message count per run, where it applies. */
  count?: number;
  note?: string;
}

export interface TargetInfo {
  id: string;
  label: string;
  durability: string;
  versions: Record<string, string>;
  consumeNote: string;
  skipped?: string;
}

export interface GoalCheck {
  id: string;
  goal: string;
  /** Measured ratio or value (median over runs). */
  value: number | null;
  /** Per-run values (same-run ratios). */
  runs: number[];
  /** e.g. "≥ 1.5×". */
  threshold: string;
  met: boolean | null;
  note?: string;
}

export interface Results {
  kind: 'full' | 'smoke';
  startedAt: string;
  finishedAt: string;
  seconds: number;
  machine: {
    cpu: string;
    cores: number;
    memoryGB: number;
    node: string;
    os: string;
    loadAtStart: number[];
    loadAtEnd: number[];
  };
  counts: Record<string, unknown>;
  targets: TargetInfo[];
  figures: Figure[];
  goals: GoalCheck[];
  /** Scenario key → why it has no figure (e.g. scenario 7's extension parts before they exist). */
  unmeasured: Record<string, string>;
  notes: string[];
  errors: string[];
}
