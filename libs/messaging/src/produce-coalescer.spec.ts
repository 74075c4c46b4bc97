import type { ProducerBatch } from 'kafkajs';
import { BatchProducer, PermanentPublishError, ProduceCoalescer, RawMessage } from './produce-coalescer';

const msg = (key: string, value = 'v'): RawMessage => ({ key, value });

/** A fake producer per generation: records every request and refuses any message whose value is longer than `maxValue`. */
function fakeProducers(opts: { maxValue?: number; failTransient?: number } = {}) {
  const requests: Array<{ generation: number; topics: Array<[string, string[]]> }> = [];
  let generation = 0;
  let transientLeft = opts.failTransient ?? 0;
  let current: BatchProducer | undefined;
  const make = (gen: number): BatchProducer => ({
    sendBatch: async (batch: ProducerBatch) => {
      await new Promise((r) => setImmediate(r));
      requests.push({ generation: gen, topics: (batch.topicMessages ?? []).map((t) => [t.topic, t.messages.map((m) => String(m.key))]) });
      if (transientLeft > 0) {
        transientLeft -= 1;
        throw Object.assign(new Error('Connection error'), { name: 'KafkaJSConnectionError' });
      }
      const tooLarge = batch.topicMessages?.some((t) => t.messages.some((m) => String(m.value).length > (opts.maxValue ?? Infinity)));
      if (tooLarge) throw Object.assign(new Error('too large'), { type: 'MESSAGE_TOO_LARGE' });
    },
  });
  const coalescer = new ProduceCoalescer({
    producer: async () => (current ??= make(generation)),
    replaceProducer: () => {
      current = undefined;
      generation += 1;
    },
    maxRequestBytes: 100,
  });
  return { coalescer, requests };
}

describe('ProduceCoalescer', () => {
  it('sends the publishes of one tick in one request, topics merged, order kept', async () => {
    const { coalescer, requests } = fakeProducers();
    await Promise.all([coalescer.send('a', [msg('1'), msg('2')]), coalescer.send('b', [msg('3')]), coalescer.send('a', [msg('4')])]);
    expect(requests).toEqual([
      {
        generation: 0,
        topics: [
          ['a', ['1', '2', '4']],
          ['b', ['3']],
        ],
      },
    ]);
  });

  it('gathers what is issued while a request is in flight into the next request', async () => {
    const { coalescer, requests } = fakeProducers();
    const first = coalescer.send('a', [msg('1')]);
    await new Promise((r) => setImmediate(r)); // the first request is now in flight
    const rest = [coalescer.send('a', [msg('2')]), coalescer.send('a', [msg('3')])];
    await Promise.all([first, ...rest]);
    expect(requests.map((r) => r.topics)).toEqual([[['a', ['1']]], [['a', ['2', '3']]]]);
  });

  it('cuts requests at the byte limit; a caller larger than the limit goes alone', async () => {
    const { coalescer, requests } = fakeProducers();
    await Promise.all([
      coalescer.send('a', [msg('1', 'x'.repeat(60))]),
      coalescer.send('a', [msg('2', 'x'.repeat(60))]),
      coalescer.send('a', [msg('3', 'x'.repeat(200))]),
      coalescer.send('a', [msg('4')]),
    ]);
    expect(requests.map((r) => r.topics[0][1])).toEqual([['1'], ['2'], ['3'], ['4']]);
  });

  it('a refused request is sent again caller by caller on a new producer; only the refused caller fails', async () => {
    const { coalescer, requests } = fakeProducers({ maxValue: 10 });
    const results = await Promise.allSettled([
      coalescer.send('a', [msg('1')]),
      coalescer.send('a', [msg('2', 'x'.repeat(20))]),
      coalescer.send('b', [msg('3')]),
    ]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    const refused = (results[1] as PromiseRejectedResult).reason as PermanentPublishError;
    expect(refused).toBeInstanceOf(PermanentPublishError);
    expect(refused.refusal).toBe('MESSAGE_TOO_LARGE');
    // merged on producer 0; after it failed no request reuses producer 0, and after the refusal of '2' none reuses producer 1
    expect(requests).toEqual([
      {
        generation: 0,
        topics: [
          ['a', ['1', '2']],
          ['b', ['3']],
        ],
      },
      { generation: 1, topics: [['a', ['1']]] },
      { generation: 1, topics: [['a', ['2']]] },
      { generation: 2, topics: [['b', ['3']]] },
    ]);
  });

  it('a transient failure fails every caller of the request as is, and the next request uses a new producer', async () => {
    const { coalescer, requests } = fakeProducers({ failTransient: 1 });
    const results = await Promise.allSettled([coalescer.send('a', [msg('1')]), coalescer.send('a', [msg('2')])]);
    expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected']);
    expect((results[0] as PromiseRejectedResult).reason).not.toBeInstanceOf(PermanentPublishError);
    await coalescer.send('a', [msg('3')]);
    expect(requests.map((r) => r.generation)).toEqual([0, 1]);
  });
});
