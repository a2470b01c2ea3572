import { strict as assert } from 'assert';
import * as path from 'path';
import { resolveDataDir } from '../../../src/core/dataDir';

describe('extension: the data directory', () => {
  const storage = path.join('/home/u/.vscode/globalStorage', 'quayside.quayside');

  it('defaults to .quayside/ in the first workspace folder; relative settings start there', () => {
    assert.equal(resolveDataDir('', '/w/app', storage), path.join('/w/app', '.quayside'));
    assert.equal(resolveDataDir('  ', '/w/app', storage), path.join('/w/app', '.quayside'));
    assert.equal(resolveDataDir('tmp/q', '/w/app', storage), path.resolve('/w/app', 'tmp/q'));
    assert.equal(resolveDataDir('/data/q', '/w/app', storage), '/data/q');
  });

  it('with no folder open, uses the global storage (never the extension directory)', () => {
    assert.equal(resolveDataDir('', undefined, storage), path.join(storage, '.quayside'));
    assert.equal(resolveDataDir('q', undefined, storage), path.resolve(storage, 'q'));
  });

  it('expands ${workspaceFolder} and a leading ~ (a ~ inside a name stays)', () => {
    assert.equal(resolveDataDir('${workspaceFolder}/.q', '/w/app', storage, '/home/u'), path.resolve('/w/app/.q'));
    assert.equal(resolveDataDir('${workspaceFolder}/.q', undefined, storage, '/home/u'), path.resolve(storage, '.q'));
    assert.equal(resolveDataDir('~/quayside', '/w/app', storage, '/home/u'), path.resolve('/home/u/quayside'));
    assert.equal(resolveDataDir('~', '/w/app', storage, '/home/u'), '/home/u');
    assert.equal(resolveDataDir('a~b', '/w/app', storage, '/home/u'), path.resolve('/w/app', 'a~b'));
  });
});
