import assert from 'node:assert/strict';
import { crashOk } from '../../scripts/crash-test';
import { formatSoak, runSoak } from '../../scripts/soak';

// The soak run at CI size (20 s). The long run is `npm run soak` (10 minutes).

describe('reliability: soak', function () {
  this.timeout(120_000);

  it('20 s of mixed load keeps RSS flat and loses nothing', async () => {
    const x = await runSoak({ ms: 20_000 });
    console.log(formatSoak(x).replace(/^/gm, '      '));
    assert.ok((x.rssKb ?? []).length >= 18, 'too few RSS samples');
    assert.ok(x.answeredPushes > 1000 && x.answeredAcks > 500, 'the load was too light to mean anything');
    assert.equal(x.losses, 0);
    assert.equal(x.duplicates, 0);
    assert.equal(x.redeliveredAfterAck, 0);
    assert.equal(x.integrity, 'ok');
    assert.ok(x.rssFlat, `RSS grew by ${x.rssGrowthMb} MiB`);
    assert.ok(crashOk(x), x.failures.join('\n'));
  });
});
