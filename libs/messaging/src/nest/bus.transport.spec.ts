import { Test } from '@nestjs/testing';
import { Ctx, EventPattern, Payload } from '@nestjs/microservices';
import { DeadLetterV1, PolicyChangedV1, Topics } from '@gateway/contracts';
import { MessageMeta } from '../poison-guard';
import { SubscribeOptions } from '../kafka-bus';
import { BusConsumer, BusContext, BusSubscriber, BusTransport, PER_INSTANCE_COMMIT_INTERVAL_MS, poisonPattern } from './bus.transport';

const calls: string[] = [];

@BusConsumer()
class PolicyChangesConsumer {
  @EventPattern(Topics.policyChanged.name, { group: 'audit', perInstance: true, concurrency: 2 })
  async changed(@Payload() e: PolicyChangedV1, @Ctx() ctx: BusContext): Promise<void> {
    if (e.entity_id === 'bad') throw new RangeError('deterministic');
    calls.push(`${e.entity_id}@${ctx.meta.offset}`);
  }

  @EventPattern(poisonPattern(Topics.policyChanged.name))
  async parked(@Payload() d: DeadLetterV1, @Ctx() ctx: BusContext): Promise<void> {
    calls.push(`parked ${d.offset} raw=${JSON.stringify(ctx.raw)}`);
  }
}

type Handler = (payload: unknown, meta: MessageMeta) => Promise<void>;

function fakeBus() {
  const subs: Array<{ topic: string; options: SubscribeOptions; handler: Handler }> = [];
  const bus: BusSubscriber = {
    subscribe: async (topic, options, handler) => {
      subs.push({ topic, options, handler: handler as Handler });
      return { status: () => ({}) as never, stop: async () => undefined };
    },
    subscribeBatch: async () => {
      throw new Error('no batch consumer in these specs');
    },
  };
  return { bus, subs };
}

const meta: MessageMeta = { topic: Topics.policyChanged.name, partition: 0, offset: '7', key: null, headers: {} };

async function started(controllers: Array<new () => unknown>) {
  const { bus, subs } = fakeBus();
  const module = await Test.createTestingModule({ controllers }).compile();
  const app = module.createNestMicroservice({ strategy: new BusTransport(bus, { instanceId: 'svc-1', instanceSuffix: () => 'i1' }) });
  await app.listen();
  return { app, subs };
}

describe('BusTransport', () => {
  beforeEach(() => calls.splice(0));

  it('subscribes each @EventPattern topic with its extras and runs the handler with its context', async () => {
    const { app, subs } = await started([PolicyChangesConsumer]);
    expect(subs.map((s) => [s.topic, s.options.groupId, s.options.concurrency])).toEqual([['policyChanged', 'audit-i1', 2]]);
    // a group of this process alone commits on an interval, not after every batch
    expect(subs[0].options.commitIntervalMs).toBe(PER_INSTANCE_COMMIT_INTERVAL_MS);
    await subs[0].handler({ entity_id: 'w1' }, meta);
    expect(calls).toEqual(['w1@7']);
    await app.close();
  });

  it('a shared group commits after every batch unless it names an interval; fetch settings pass through', async () => {
    @BusConsumer()
    class Shared {
      @EventPattern(Topics.policyChanged.name, { group: 'plain' })
      async plain(): Promise<void> {}
    }
    @BusConsumer()
    class Idempotent {
      @EventPattern(Topics.policyChanged.name, { group: 'claims', commitIntervalMs: 750, fetch: { minBytes: 4096, maxWaitMs: 200 } })
      async claimed(): Promise<void> {}
    }
    for (const [controller, interval, fetch] of [
      [Shared, undefined, undefined],
      [Idempotent, 750, { minBytes: 4096, maxWaitMs: 200 }],
    ] as const) {
      const { app, subs } = await started([controller]);
      expect(subs[0].options.commitIntervalMs).toBe(interval);
      expect(subs[0].options.fetch).toEqual(fetch);
      await app.close();
    }
  });

  it('hands handler errors to the bus unchanged, so the poison policy sees their class', async () => {
    const { app, subs } = await started([PolicyChangesConsumer]);
    await expect(subs[0].handler({ entity_id: 'bad' }, meta)).rejects.toBeInstanceOf(RangeError);
    await app.close();
  });

  it('wires the topic poison hook with the dead-letter record and the raw payload', async () => {
    const { app, subs } = await started([PolicyChangesConsumer]);
    const record: DeadLetterV1 = {
      event_id: '6f1c2b1e-7d2a-5c3b-9a4d-0e1f2a3b4c5d',
      topic: meta.topic,
      partition: 0,
      offset: '7',
      key: null,
      consumer_group: 'audit-i1',
      source_event_id: null,
      action_id: null,
      attempt_id: null,
      reason_class: 'deterministic_error',
      error_class: 'RangeError',
      reason: 'deterministic',
      attempts: 1,
      first_seen_at: '2026-12-01T00:00:00.000Z',
      parked_at: '2026-12-01T00:00:00.000Z',
    };
    await subs[0].options.onPoison?.(record, { entity_id: 'bad' });
    expect(calls).toEqual(['parked 7 raw={"entity_id":"bad"}']);
    await app.close();
  });

  it("an addressed consumer reads only its instance's partition and skips what names another instance", async () => {
    @BusConsumer()
    class Replies {
      @EventPattern(Topics.dispatchReplies.name, { group: 'r', perInstance: true, addressed: true })
      async handle(): Promise<void> {}
    }
    const { app, subs } = await started([Replies]);
    expect(subs[0].options.recipient).toEqual({ id: 'svc-1', partitions: [1], header: 'reply-to' });
    await app.close();
  });

  it('refuses an addressed consumer shared between instances', async () => {
    @BusConsumer()
    class Shared {
      @EventPattern(Topics.dispatchReplies.name, { group: 'r', addressed: true })
      async handle(): Promise<void> {}
    }
    await expect(started([Shared])).rejects.toThrow(/needs perInstance/);
  });

  it('refuses a pattern that is not a declared topic', async () => {
    @BusConsumer()
    class Stray {
      @EventPattern('not.a.topic', { group: 'g' })
      async handle(): Promise<void> {}
    }
    await expect(started([Stray])).rejects.toThrow(/not a topic declared in libs\/contracts/);
  });
});
