import { stopKafkajsIdleLoop } from './kafkajs-idle-loop';

// The real kafkajs class, not a mock: the patch is only as good as its fit to it.
const RequestQueue = require('kafkajs/src/network/requestQueue') as new (opts: object) => {
  pending: unknown[];
  throttledUntil: number;
  throttleCheckTimeoutId: NodeJS.Timeout | null;
  checkPendingRequests(): void;
  scheduleCheckPendingRequests(): void;
};

const logger = { debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined };
const queue = () =>
  new RequestQueue({
    instrumentationEmitter: null,
    maxInFlightRequests: 1,
    requestTimeout: 1000,
    enforceRequestTimeout: false,
    clientId: 'spec',
    broker: 'spec:9092',
    logger: { namespace: () => logger },
    isConnected: () => true,
  });

describe('stopKafkajsIdleLoop', () => {
  it('leaves no timer behind a check of an empty, unthrottled queue, and still schedules one for a pending request or a throttle', () => {
    expect(stopKafkajsIdleLoop()).toBe(true);
    expect(stopKafkajsIdleLoop()).toBe(true);

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
});
