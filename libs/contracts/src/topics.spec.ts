import fc from 'fast-check';
import { replyTopicKey } from './events';
import { addressTo, allTopics, RECIPIENT_HEADER, recipientPartition, REDELIVERY_HORIZON_MS, replyAddressOf, Topics } from './topics';

describe('recipientPartition', () => {
  it.each([
    ['admission-1', 6, 1],
    ['admission-2', 6, 2],
    ['admission-6', 6, 0],
    ['admission-7', 6, 1],
    ['e2e-4242-admission-2', 6, 2],
    ['gateway-admission-0', 6, 0],
    ['policy-31337', 1, 0],
    ['bench-12345', 6, 12345 % 6],
    // only the last nine digits count, so a long number stays exact
    ['x-1000000000005', 6, 5],
  ])('%s over %i partitions → %i', (id, partitions, expected) => {
    expect(recipientPartition(id, partitions)).toBe(expected);
  });

  it('hashes an id without a trailing number, the same way every time', () => {
    expect(recipientPartition('admission', 6)).toBe(recipientPartition('admission', 6));
    expect(recipientPartition('admission-x', 6)).not.toBe(recipientPartition('admission-y', 6));
  });

  it('is always a partition of the topic', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 200 }), fc.integer({ min: 1, max: 64 }), (id, partitions) => {
        const p = recipientPartition(id, partitions);
        return Number.isInteger(p) && p >= 0 && p < partitions;
      }),
    );
  });

  it('gives instances numbered alike distinct partitions, up to the partition count', () => {
    fc.assert(
      fc.property(fc.stringMatching(/^[a-z0-9-]{0,30}$/), fc.integer({ min: 1, max: 64 }), fc.nat(1000), (prefix, partitions, first) => {
        const ids = Array.from({ length: partitions }, (_, i) => `${prefix}-${first + i}`);
        return new Set(ids.map((id) => recipientPartition(id, partitions))).size === partitions;
      }),
    );
  });

  it('refuses a partition count that is not a positive integer', () => {
    expect(() => recipientPartition('a-1', 0)).toThrow(RangeError);
    expect(() => recipientPartition('a-1', 1.5)).toThrow(RangeError);
  });
});

describe('addressTo', () => {
  it('names the partition and the recipient header', () => {
    expect(addressTo('dispatchReplies', 'admission-2')).toEqual({ partition: 2, headers: { [RECIPIENT_HEADER]: 'admission-2' } });
    expect(addressTo('probeReplies', 'policy-9')).toEqual({ partition: 0, headers: { 'reply-to': 'policy-9' } });
  });

  it('refuses a topic that is not addressed', () => {
    expect(() => addressTo('attemptCompleted', 'settlement-1')).toThrow(/not an addressed topic/);
  });
});

describe('the redelivery horizon', () => {
  it("outlasts every topic: its retention plus the broker's 7-day segment roll", () => {
    const DAY = 24 * 60 * 60 * 1000;
    for (const t of allTopics()) expect(REDELIVERY_HORIZON_MS).toBeGreaterThanOrEqual(t.retentionMs + 7 * DAY);
  });
});

describe('reply topics', () => {
  it('are declared, addressed, content-bearing and kept briefly', () => {
    for (const key of replyTopicKey.options) {
      expect(Topics[key]).toMatchObject({ addressed: true, contentBearing: true, visibility: 'internal' });
      expect(Topics[key].retentionMs).toBeLessThanOrEqual(60 * 60 * 1000);
    }
    expect(new Set(allTopics().map((t) => t.name)).size).toBe(allTopics().length);
  });

  it('a command without reply_topic (an older sender) is answered on dispatchReplies', () => {
    expect(replyAddressOf({ reply_to: 'admission-1' })).toEqual({ instanceId: 'admission-1', topic: 'dispatchReplies' });
    expect(replyAddressOf({ reply_to: 'policy-1', reply_topic: 'probeReplies' })).toEqual({
      instanceId: 'policy-1',
      topic: 'probeReplies',
    });
  });
});

describe("a dispatch reply's held_ms", () => {
  const envelope = {
    event_id: '5b0c4a3e-8f2a-4b1e-9c55-0d2b3f4a5e6f',
    action_id: 'act-1',
    reply_to: 'admission-1',
    body: { alg: 'A256GCM' as const, kid: 'k1', iv: 'aXY=', tag: 'dGFn', ct: 'Y3Q=' },
  };

  it('is kept when it is a count of ms', () => {
    expect(Topics.dispatchReplies.schema.parse({ ...envelope, held_ms: 290 }).held_ms).toBe(290);
    expect(Topics.dispatchReplies.schema.parse(envelope).held_ms).toBeUndefined();
  });

  it.each([-1, 1.5, '290', null, Number.NaN, Infinity, { ms: 1 }, 2 ** 60])(
    'is dropped when it is not (%p), and the reply is still delivered',
    (held) => {
      const parsed = Topics.dispatchReplies.schema.parse({ ...envelope, held_ms: held });
      expect(parsed.held_ms).toBeUndefined();
      expect(parsed.action_id).toBe('act-1');
    },
  );
});
