import { z } from 'zod';
import { DeadLetterV1, deadLetterV1 } from '@gateway/contracts';
import { BatchGuard, BatchItem } from './batch-guard';
import { Delivery, PoisonGuard } from './poison-guard';

const schema = z.object({ event_id: z.string(), n: z.number() });
type P = z.infer<typeof schema>;
const quiet = { info: () => undefined, warn: () => undefined, error: () => undefined };

function harness(handler: (items: Array<BatchItem<P>>) => Promise<void>, stopping = () => false) {
  const parked: DeadLetterV1[] = [];
  const calls: number[][] = [];
  const recording = async (items: Array<BatchItem<P>>) => {
    calls.push(items.map((i) => i.payload.n));
    await handler(items);
  };
  const guard = new PoisonGuard<P>(
    'group-1',
    (raw) => schema.parse(raw),
    (payload, meta) => recording([{ payload, meta }]),
    {
      logger: quiet,
      now: () => new Date('2026-12-01T00:00:00.000Z'),
      publishDeadLetter: async (r) => {
        parked.push(deadLetterV1.parse(r));
      },
    },
    { initialBackoffMs: 1, maxBackoffMs: 2, maxTransientRetries: 2 },
  );
  const batches = new BatchGuard(guard, (raw) => schema.parse(raw), recording, quiet);
  const delivery = (offset: number, value: string): Delivery => ({
    meta: { topic: 'gateway.t.v1', partition: 0, offset: String(offset), key: null, headers: {} },
    value,
    heartbeat: async () => undefined,
    stopping,
  });
  const msg = (n: number) => delivery(n, JSON.stringify({ event_id: `e${n}`, n }));
  return { batches, parked, calls, msg, delivery };
}

describe('BatchGuard', () => {
  it('hands the schema-valid messages to the handler together and parks the invalid one', async () => {
    const h = harness(async () => undefined);
    await h.batches.deliver([h.msg(1), h.delivery(2, '{"nope":true}'), h.msg(3)]);
    expect(h.calls).toEqual([[1, 3]]);
    expect(h.parked.map((p) => [p.offset, p.reason_class])).toEqual([['2', 'schema_invalid']]);
  });

  it('splits a failed batch in halves down to single messages: the poison one is parked, the others handled', async () => {
    const handled: number[] = [];
    const h = harness(async (items) => {
      if (items.some((i) => i.payload.n === 2)) throw new RangeError('poison');
      handled.push(...items.map((i) => i.payload.n));
    });
    await h.batches.deliver([h.msg(1), h.msg(2), h.msg(3)]);
    expect(h.calls).toEqual([[1, 2, 3], [1, 2], [1], [2], [3]]);
    expect(handled).toEqual([1, 3]);
    expect(h.parked.map((p) => [p.offset, p.reason_class])).toEqual([['2', 'deterministic_error']]);
  });

  it('throws (offsets stay uncommitted) when the batch fails while the consumer stops', async () => {
    const h = harness(
      async () => {
        throw new Error('connection terminated');
      },
      () => true,
    );
    await expect(h.batches.deliver([h.msg(1), h.msg(2)])).rejects.toThrow('connection terminated');
    expect(h.parked).toEqual([]);
  });
});
