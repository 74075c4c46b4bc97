import { ReplyRouter } from './reply-router';
import { DispatchReplyV1 } from '@gateway/contracts';

const reply: DispatchReplyV1 = {
  kind: 'response',
  http_status: 200,
  body: {},
  attempt_id: 'at',
  provider_request_id: null,
  requested_candidates: null,
  effective_candidates: 1,
  returned_candidates: 1,
  candidates: [],
};

describe('ReplyRouter', () => {
  it('hands a reply to the waiter registered for its action', async () => {
    const router = new ReplyRouter();
    const now = new Date();
    const waiting = router.awaitReply('a1', new Date(now.getTime() + 1000), now);
    expect(router.deliver('a2', reply)).toBe(false);
    expect(router.deliver('a1', reply)).toBe(true);
    await expect(waiting).resolves.toBe(reply);
    expect(router.pending).toBe(0);
  });

  it('times out at the deadline and forgets the waiter', async () => {
    jest.useFakeTimers();
    const router = new ReplyRouter();
    const now = new Date(0);
    const waiting = router.awaitReply('a1', new Date(50), now);
    jest.advanceTimersByTime(50);
    await expect(waiting).resolves.toBe('timeout');
    expect(router.deliver('a1', reply)).toBe(false);
    jest.useRealTimers();
  });
});
