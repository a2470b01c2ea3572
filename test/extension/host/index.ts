// The in-host suite's entry: VS Code (or the offline runner) loads this and calls run().
import { runMochaSuite } from './mocha-index';

export function run(): Promise<void> {
  return runMochaSuite(__dirname, ['extension.test.js']);
}
