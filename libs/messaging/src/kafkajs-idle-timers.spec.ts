import { quietKafkajsIdleTimers, REQUEST_TIMEOUT_CHECK_MS } from './kafkajs-idle-timers';

// The real kafkajs class, not a mock: the patch is only as good as its fit to it.
const RequestQueue = require('kafkajs/src/network/requestQueue') as new (opts: object) => {
  pending: unknown[];
  inflight: Map<number, { sentAt: number; requestTimeout: number; timeoutRequest(): void }>;
  throttledUntil: number;
  throttleCheckTimeoutId: NodeJS.Timeout | null;
  checkPendingRequests(): void;
  scheduleCheckPendingRequests(): void;
  scheduleRequestTimeoutCheck(): void;
  destroy(): void;
};

const logger = { debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined };
const queue = () =>
  new RequestQueue({
    instrumentationEmitter: null,
    maxInFlightRequests: 1,
    requestTimeout: 10_000,
    enforceRequestTimeout: true,
    clientId: 'spec',
    broker: 'spec:9092',
    logger: { namespace: () => logger },
    isConnected: () => true,
  });

describe('quietKafkajsIdleTimers', () => {
  it('leaves no timer behind a check of an empty, unthrottled queue, and still schedules one for a pending request or a throttle', () => {
    expect(quietKafkajsIdleTimers()).toBe(true);
    expect(quietKafkajsIdleTimers()).toBe(true);

    const idle = queue();
    idle.checkPendingRequests();
    expect(idle.throttleCheckTimeoutId).toBeNull();

    const throttled = queue();
    throttled.throttledUntil = Date.now() + 60_000;
    throttled.scheduleCheckPendingRequests();
    expect(throttled.throttleCheckTimeoutId).not.toBeNull();
    clearTimeout(throttled.throttleCheckTimeoutId!);

    const waiting = queue();
    waiting.pending.push({});
    waiting.scheduleCheckPendingRequests();
    expect(waiting.throttleCheckTimeoutId).not.toBeNull();
    clearTimeout(waiting.throttleCheckTimeoutId!);
  });

  it('checks in-flight requests against their timeout every second, not every 100 ms', async () => {
    quietKafkajsIdleTimers();
    jest.useFakeTimers();
    try {
      const q = queue();
      const timedOut: number[] = [];
      q.inflight.set(1, { sentAt: Date.now(), requestTimeout: 10_000, timeoutRequest: () => timedOut.push(Date.now()) });
      const t0 = Date.now();
      q.scheduleRequestTimeoutCheck();
      await jest.advanceTimersByTimeAsync(10_000 + REQUEST_TIMEOUT_CHECK_MS - 1);
      expect(timedOut).toEqual([]);
      await jest.advanceTimersByTimeAsync(1);
      expect(timedOut).toEqual([t0 + 11_000]);
      q.destroy();
    } finally {
      jest.useRealTimers();
    }
  });
});
