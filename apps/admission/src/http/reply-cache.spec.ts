import type { DispatchReplyV1 } from '@gateway/contracts';
import { ContentCipher } from '@gateway/messaging';
import { ReplyCache } from './reply-cache';
import { ONE_CANDIDATE_COUNTS } from './reply.fixture';

const reply: DispatchReplyV1 = {
  kind: 'response',
  http_status: 200,
  body: { choices: [{ message: { content: 'naïve 日本' } }] },
  ...ONE_CANDIDATE_COUNTS,
};

describe('ReplyCache', () => {
  let now = new Date('2026-03-01T12:00:00.000Z');
  const cache = new ReplyCache(new ContentCipher(Buffer.alloc(32, 5)), { now: () => now });

  it('gives back what it holds for ten minutes on the injected clock, and nothing after', () => {
    cache.put('act-1', reply);
    now = new Date(now.getTime() + 10 * 60 * 1000);
    expect(cache.get('act-1')).toEqual({ reply, headers: {} });
    now = new Date(now.getTime() + 1);
    expect(cache.get('act-1')).toBeNull();
    expect(cache.get('act-unknown')).toBeNull();
  });
});

describe('ReplyCache, bounded by bytes', () => {
  const now = new Date('2026-03-01T12:00:00.000Z');
  /** An answer of about `kib` KiB of completion text. */
  const large = (i: number, kib: number): DispatchReplyV1 => ({
    kind: 'response',
    http_status: 200,
    body: { choices: [{ message: { content: `${i}:`.padEnd(kib * 1024, 'x') } }] },
    ...ONE_CANDIDATE_COUNTS,
  });
  const MIB = 1024 * 1024;

  it('keyed requests with large answers never hold more than REPLY_CACHE_MAX_BYTES: the oldest go first', () => {
    const cache = new ReplyCache(new ContentCipher(Buffer.alloc(32, 5)), { now: () => now }, { replyCacheMaxBytes: 8 * MIB });
    // 40 answers of 700 KiB (~950 KB sealed): 37 MB unbounded, as the count bound (5,000) allowed
    for (let i = 0; i < 40; i++) {
      cache.put(`act-${i}`, large(i, 700));
      expect(cache.heldBytes).toBeLessThanOrEqual(8 * MIB);
    }
    expect(cache.heldBytes).toBeGreaterThan(6 * MIB);
    expect(cache.get('act-39')?.reply).toEqual(large(39, 700));
    expect(cache.get('act-30')).toBeNull();
    expect(cache.get('act-0')).toBeNull();
  });

  it('an answer larger than the whole bound is not held, and pushes nothing out', () => {
    const cache = new ReplyCache(new ContentCipher(Buffer.alloc(32, 5)), { now: () => now }, { replyCacheMaxBytes: MIB });
    cache.put('small', large(0, 1));
    cache.put('huge', large(1, 900)); // ~1.2 MB sealed
    expect(cache.get('huge')).toBeNull();
    expect(cache.get('small')?.reply).toEqual(large(0, 1));
  });

  it('the same action put twice is counted once', () => {
    const cache = new ReplyCache(new ContentCipher(Buffer.alloc(32, 5)), { now: () => now }, { replyCacheMaxBytes: MIB });
    cache.put('a', large(0, 10));
    const once = cache.heldBytes;
    cache.put('a', large(0, 10));
    expect(cache.heldBytes).toBe(once);
  });
});
