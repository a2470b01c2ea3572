import assert from 'node:assert/strict';
import { QuaysideError } from '../../emulator/errors';
describe('smoke', () => { it('works', () => { assert.equal(new QuaysideError('conflict','x').status, 409); }); });
