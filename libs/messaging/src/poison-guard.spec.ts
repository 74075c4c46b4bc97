import { z } from 'zod';
import { DeadLetterV1, deadLetterV1 } from '@gateway/contracts';
import { BusLogger, PoisonGuard, Delivery } from './poison-guard';
import { deadLetterId, defaultClassifier, PoisonPolicy, sanitisedReason } from './poison-policy';

const schema = z.object({ event_id: z.string(), action_id: z.string(), attempt_id: z.string(), n: z.number() });
type P = z.infer<typeof schema>;
const NOW = new Date('2026-12-01T00:00:00.000Z');
const quiet = { info: () => undefined, warn: () => undefined, error: () => undefined };
const FAST = { initialBackoffMs: 1, maxBackoffMs: 2, maxTransientRetries: 3 };

function harness(
  handler: (p: P) => Promise<void>,
  onPoison?: (r: DeadLetterV1) => Promise<void>,
  over: { policy?: Partial<PoisonPolicy>; now?: () => Date; logger?: BusLogger } = {},
) {
  const parked: DeadLetterV1[] = [];
  const counted: string[] = [];
  const guard = new PoisonGuard<P>(
    'group-1',
    (raw) => schema.parse(raw),
    handler,
    {
      logger: over.logger ?? quiet,
      now: over.now ?? (() => NOW),
      publishDeadLetter: async (r) => {
        parked.push(deadLetterV1.parse(r));
      },
      counter: { inc: (l) => counted.push(`${l.topic}|${l.consumer}|${l.reason_class}`) },
    },
    { ...FAST, ...over.policy },
    onPoison,
  );
  const delivery = (value: string | null): Delivery => ({
    meta: { topic: 'gateway.t.v1', partition: 2, offset: '41', key: 'k', headers: {} },
    value,
    heartbeat: async () => undefined,
    stopping: () => false,
  });
  return { guard, parked, counted, delivery };
}

const good = JSON.stringify({ event_id: 'e1', action_id: 'a1', attempt_id: 't1', n: 1 });

describe('PoisonGuard', () => {
  it('retries a transient error in place and then handles the message', async () => {
    let calls = 0;
    const h = harness(async () => {
      if (++calls < 3) throw Object.assign(new Error('connection terminated'), { code: 'ECONNRESET' });
    });
    await h.guard.deliver(h.delivery(good));
    expect(calls).toBe(3);
    expect(h.parked).toEqual([]);
  });

  it('parks a deterministic error at once, with ids and a sanitised reason only', async () => {
    let calls = 0;
    const h = harness(async () => {
      calls++;
      throw new RangeError('cachedInputTokens (900) cannot exceed inputTokens (10) for "secret prompt text"');
    });
    await h.guard.deliver(h.delivery(good));
    expect(calls).toBe(1);
    expect(h.parked).toEqual([
      {
        event_id: deadLetterId('group-1', 'gateway.t.v1', 2, '41'),
        topic: 'gateway.t.v1',
        partition: 2,
        offset: '41',
        key: 'k',
        consumer_group: 'group-1',
        source_event_id: 'e1',
        action_id: 'a1',
        attempt_id: 't1',
        reason_class: 'deterministic_error',
        error_class: 'RangeError',
        reason: 'cachedInputTokens (…) cannot exceed inputTokens (…) for …',
        attempts: 1,
        first_seen_at: NOW.toISOString(),
        parked_at: NOW.toISOString(),
      },
    ]);
    expect(h.counted).toEqual(['gateway.t.v1|group-1|deterministic_error']);
  });

  it('parks an error that keeps failing after the transient retries', async () => {
    let calls = 0;
    const h = harness(async () => {
      calls++;
      throw new Error('price revision missing');
    });
    await h.guard.deliver(h.delivery(good));
    expect(calls).toBe(FAST.maxTransientRetries + 1);
    expect(h.parked.map((p) => [p.reason_class, p.attempts])).toEqual([['retries_exhausted', 4]]);
  });

  describe('an unavailable dependency (the database server down or restarting)', () => {
    const down = Object.assign(new Error("Can't reach database server"), { code: 'P1001' });
    const classify = (err: unknown) => (err === down ? 'unavailable' : defaultClassifier(err));

    it('is retried past the transient retries until the handler succeeds: nothing is parked', async () => {
      let calls = 0;
      const h = harness(
        async () => {
          if (++calls <= 3 * FAST.maxTransientRetries) throw down;
        },
        undefined,
        { policy: { classify } },
      );
      await h.guard.deliver(h.delivery(good));
      expect(calls).toBe(3 * FAST.maxTransientRetries + 1);
      expect(h.parked).toEqual([]);
    });

    it('does not use up the transient retries of the same delivery', async () => {
      const errors = [down, down, down, down, down, new Error('a lock timeout'), new Error('again')];
      let calls = 0;
      const h = harness(
        async () => {
          const e = errors[calls++];
          if (e) throw e;
        },
        undefined,
        { policy: { classify } },
      );
      await h.guard.deliver(h.delivery(good));
      expect(calls).toBe(errors.length + 1);
      expect(h.parked).toEqual([]);
    });

    it('logs an outage when it starts and then once per unavailableLogEveryMs; every transient retry is logged', async () => {
      let clock = NOW.getTime();
      let calls = 0;
      const warns: Array<Record<string, unknown>> = [];
      const logger = { ...quiet, warn: (o: object) => void warns.push(o as Record<string, unknown>) };
      const h = harness(
        async () => {
          calls++;
          clock += 1_000; // each try a second after the last
          if (calls === 3) throw new Error('a lock timeout');
          if (calls <= 12) throw down;
        },
        undefined,
        { policy: { classify, unavailableLogEveryMs: 5_000 }, now: () => new Date(clock), logger },
      );
      await h.guard.deliver(h.delivery(good));
      expect(calls).toBe(13);
      expect(h.parked).toEqual([]);
      expect(warns.map((w) => [w.attempt, w.kind, w.unavailable_for_ms])).toEqual([
        [1, 'unavailable', 0],
        [3, 'transient', undefined],
        [6, 'unavailable', 5_000],
        [11, 'unavailable', 10_000],
      ]);
    });

    it('is parked once it has lasted longer than maxUnavailableMs', async () => {
      let clock = NOW.getTime();
      let calls = 0;
      const h = harness(
        async () => {
          calls++;
          clock += 1_000; // each try finds the server still down a second later
          throw down;
        },
        undefined,
        { policy: { classify, maxUnavailableMs: 10_000 }, now: () => new Date(clock) },
      );
      await h.guard.deliver(h.delivery(good));
      // first seen after the first try; parked at the first try more than 10 s after that
      expect(calls).toBe(12);
      expect(h.parked.map((p) => [p.reason_class, p.attempts])).toEqual([['retries_exhausted', 12]]);
    });
  });

  it('parks a message that does not match its schema without running the handler or the hook', async () => {
    const hook = jest.fn(async () => undefined);
    const handler = jest.fn(async () => undefined);
    const h = harness(handler, hook);
    await h.guard.deliver(h.delivery(JSON.stringify({ event_id: 'e2', n: 'x' })));
    await h.guard.deliver(h.delivery('CANARY not json'));
    expect(handler).not.toHaveBeenCalled();
    expect(hook).not.toHaveBeenCalled();
    expect(h.parked.map((p) => [p.reason_class, p.source_event_id])).toEqual([
      ['schema_invalid', 'e2'],
      ['schema_invalid', null],
    ]);
    expect(h.parked[0].reason).toMatch(/^invalid_type at action_id/);
    expect(h.parked[1]).toMatchObject({ error_class: 'SyntaxError', reason: 'message value is not JSON' });
  });

  it('runs the poison hook before parking; when it fails nothing is parked and the delivery fails', async () => {
    const h = harness(
      async () => {
        throw new TypeError('x is not a function');
      },
      async () => {
        throw new Error('database down');
      },
    );
    await expect(h.guard.deliver(h.delivery(good))).rejects.toThrow('database down');
    expect(h.parked).toEqual([]);
  });
});

describe('defaultClassifier', () => {
  it.each([
    [new RangeError('x'), 'poison'],
    [new TypeError('x'), 'poison'],
    [Object.assign(new Error('x'), { name: 'InvalidTransitionError' }), 'poison'],
    [schema.safeParse({}).error, 'poison'],
    [new TypeError('fetch failed'), 'transient'],
    [new Error('Connection terminated unexpectedly'), 'transient'],
    [Object.assign(new Error('x'), { name: 'KafkaJSConnectionError' }), 'transient'],
    ['a string', 'transient'],
  ])('%p is %s', (err, kind) => expect(defaultClassifier(err)).toBe(kind));
});

describe('sanitisedReason', () => {
  it('drops quoted values and caps the length', () => {
    expect(sanitisedReason(new Error(`bad 'CANARY' value \`x\` ${'y'.repeat(400)}`))).toHaveLength(300);
    expect(sanitisedReason(new Error(`bad 'CANARY' value`))).toBe('bad … value');
  });
});
