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
    expect(cache.get('act-1')).toEqual(reply);
    now = new Date(now.getTime() + 1);
    expect(cache.get('act-1')).toBeNull();
    expect(cache.get('act-unknown')).toBeNull();
  });
});
