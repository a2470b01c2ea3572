import assert from 'node:assert/strict';
import { crashOk, formatFigures, runCrashTest } from '../../scripts/crash-test';

// The kill -9 harness at CI size (20 kills). The long run is `npm run crash-test` (200 kills).

describe('reliability: crash safety (kill -9)', function () {
  this.timeout(180_000);

  it('loses nothing that was answered, duplicates nothing and keeps the file sound over 20 kills', async () => {
    const x = await runCrashTest({ kills: 20 });
    console.log(formatFigures(x).replace(/^/gm, '      '));
    assert.equal(x.kills, 20);
    assert.ok(x.answeredPushes > 1000, `the workload pushed too little to mean anything (${x.answeredPushes})`);
    assert.ok(x.answeredAcks > 100, `too few acks (${x.answeredAcks})`);
    assert.ok(x.killsDuring.anyWrite >= 10, `too few kills landed during writes (${x.killsDuring.anyWrite})`);
    assert.equal(x.losses, 0, 'losses');
    assert.equal(x.duplicates, 0, 'duplicates');
    assert.equal(x.redeliveredAfterAck, 0, 'redelivered after an answered ack');
    assert.equal(x.ackedButStored, 0, 'acked but still stored');
    assert.equal(x.countMismatches, 0, 'count mismatches');
    assert.equal(x.integrity, 'ok');
    assert.ok(crashOk(x), x.failures.join('\n'));
  });

  it('its check catches a lost message, a duplicate and a wrong counter (a damaged file fails the run)', async () => {
    const x = await runCrashTest({
      kills: 2,
      producers: 2,
      consumers: 1,
      tamper: (db, answered) => {
        // Remove one answered message that is still stored, and store another one twice.
        // (never delivered, so no ack of theirs can be in doubt).
        const ids = new Set(answered.values());
        const rows = (db.prepare('SELECT id FROM messages WHERE state = 0 AND attempts = 0 ORDER BY id DESC LIMIT 500').all() as { id: number }[])
          .filter((r) => ids.has(`m_${r.id}`))
          .slice(0, 2);
        assert.equal(rows.length, 2, 'the short run left undelivered messages to damage');
        db.prepare('DELETE FROM messages WHERE id = ?').run(rows[0].id);
        db.prepare('INSERT INTO messages (queue_id, state, visible_at, attempts, enqueued_at, body, size) SELECT queue_id, state, visible_at, attempts, enqueued_at, body, size FROM messages WHERE id = ?').run(rows[1].id);
        // Claim that the table's counts are exact, so nothing counts the rows again at open.
        db.prepare("INSERT OR REPLACE INTO meta (key, value) VALUES ('counts_dirty', '0')").run();
      },
    });
    assert.equal(x.losses, 1);
    assert.equal(x.duplicates, 1);
    assert.ok(x.countMismatches >= 1);
    assert.equal(crashOk(x), false);
  });
});
