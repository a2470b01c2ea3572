/**
 * V8 flags for the emulator's own process where Quayside launches it: `npm start` and the VS Code
 * extension (and the bench). (`startEmulator()` runs in the app's process and leaves its flags
 * alone. The `quayside` bin's shebang is a plain `#!/usr/bin/env node`: `env -S`, which would
 * carry a flag there, is missing from BusyBox's env (Alpine images) and the BSDs', and a bin
 * that does not start is worse than a larger nursery. The flag cannot be set once V8 has made
 * the heap.)
 *
 * The young generation is capped at 4 MiB a semi-space; V8's default grows it to 16 under load.
 * The emulator's garbage is short-lived request frames and rows: the smaller nursery costs 2–3 %
 * more time in GC under consume + ack and no rate the bench could tell apart, and the resident set
 * with a million messages queued fell from about 126 to 98 MB (bench/LIMITS.md).
 */
export const EMULATOR_NODE_FLAGS: readonly string[] = ['--max-semi-space-size=4'];
