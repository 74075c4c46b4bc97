import { setTimeout as sleep } from 'node:timers/promises';
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

  it("hears each action's queue wait once, from its first reply: the time since listen less what dispatch held", async () => {
    const router = new ReplyRouter();
    const waits: number[] = [];
    router.observeQueueWaits((waitMs) => waits.push(waitMs));
    const now = new Date();
    const later = new Date(now.getTime() + 10_000);
    const stops = ['a1', 'a2', 'a3'].map((id) =>
      router.listen(
        id,
        later,
        now,
        () => undefined,
        () => undefined,
      ),
    );
    await sleep(60);
    router.deliver('a1', reply, 0);
    router.deliver('a1', reply, 0); // a stream's next chunk: not measured again
    router.deliver('a2', reply, 55); // dispatch held it 55 of the ~60 ms
    router.deliver('a3', reply); // an older dispatcher, no held_ms: nothing to measure
    router.deliver('a3', reply, 0); // nor from its later chunks
    expect(waits).toHaveLength(2);
    expect(waits[0]).toBeGreaterThanOrEqual(55);
    expect(waits[1]).toBeLessThan(waits[0] - 50);
    expect(waits[1]).toBeGreaterThanOrEqual(0);
    router.deliver('a4', reply, 1_000_000); // nobody waits: nothing
    expect(waits).toHaveLength(2);
    stops.forEach((stop) => stop());
  });
});
