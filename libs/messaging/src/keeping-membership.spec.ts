import { keepingMembership } from './keeping-membership';

/** `keepingMembership`: heartbeats while a handler runs, none after it, none after a failed one. */
describe('keepingMembership', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  /** A handler that finishes when `finish` is called. */
  function pending<T>(): { handle: () => Promise<T>; finish: (v: T) => void; fail: (e: Error) => void } {
    let finish!: (v: T) => void;
    let fail!: (e: Error) => void;
    const p = new Promise<T>((resolve, reject) => {
      finish = resolve;
      fail = reject;
    });
    return { handle: () => p, finish, fail };
  }

  it('heartbeats every second while the handler runs, then stops, and returns what the handler returned', async () => {
    const heartbeat = jest.fn(async () => undefined);
    const h = pending<string>();
    const running = keepingMembership(heartbeat, h.handle);
    await jest.advanceTimersByTimeAsync(9_500);
    expect(heartbeat).toHaveBeenCalledTimes(9);
    h.finish('done');
    await expect(running).resolves.toBe('done');
    await jest.advanceTimersByTimeAsync(5_000);
    expect(heartbeat).toHaveBeenCalledTimes(9);
    expect(jest.getTimerCount()).toBe(0);
  });

  it('stops after a failed heartbeat (the member must rejoin after the handler anyway)', async () => {
    const heartbeat = jest
      .fn<Promise<void>, []>()
      .mockResolvedValueOnce(undefined)
      .mockRejectedValueOnce(new Error('The coordinator is not aware of this member'))
      .mockResolvedValue(undefined);
    const h = pending<void>();
    const running = keepingMembership(heartbeat, h.handle);
    await jest.advanceTimersByTimeAsync(10_000);
    expect(heartbeat).toHaveBeenCalledTimes(2);
    h.finish();
    await running;
  });

  it('a handler that fails: its error passes through and the heartbeats stop', async () => {
    const heartbeat = jest.fn(async () => undefined);
    const h = pending<void>();
    const running = keepingMembership(heartbeat, h.handle);
    await jest.advanceTimersByTimeAsync(2_000);
    h.fail(new RangeError('deterministic'));
    await expect(running).rejects.toThrow('deterministic');
    expect(jest.getTimerCount()).toBe(0);
  });
});
