import { awaitAtMost, TIMED_OUT } from './clock';

describe('awaitAtMost', () => {
  afterEach(() => jest.useRealTimers());

  it('gives the value of work that settles in time', async () => {
    await expect(awaitAtMost(Promise.resolve(7), 1_000)).resolves.toBe(7);
  });

  it('gives TIMED_OUT once the time is up, while the work is still pending', async () => {
    jest.useFakeTimers();
    const waiting = awaitAtMost(new Promise<number>(() => undefined), 2_000);
    let settled: unknown = 'pending';
    void waiting.then((v) => (settled = v));
    await jest.advanceTimersByTimeAsync(1_999);
    expect(settled).toBe('pending');
    await jest.advanceTimersByTimeAsync(1);
    expect(settled).toBe(TIMED_OUT);
  });

  it('rethrows the error of work that fails in time, and leaves no timer behind', async () => {
    jest.useFakeTimers();
    await expect(awaitAtMost(Promise.reject(new Error('refused')), 2_000)).rejects.toThrow('refused');
    expect(jest.getTimerCount()).toBe(0);
  });
});
