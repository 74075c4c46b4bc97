import { AssignerProtocol, Cluster, IHeaders, KafkaMessage } from 'kafkajs';
import { addressedElsewhere, partitionsOnly } from './addressed-consumer';
import { KafkaBus } from './kafka-bus';

function message(headers?: IHeaders): KafkaMessage {
  const base = { key: null, value: Buffer.from('{}'), timestamp: '0', attributes: 0, offset: '0' };
  return headers ? { ...base, headers } : { ...base, size: 2 };
}

describe('addressedElsewhere', () => {
  const forOthers = addressedElsewhere({ id: 'admission-1', header: 'reply-to' });

  it.each([
    ['addressed to this instance', { 'reply-to': Buffer.from('admission-1') }, false],
    ['addressed to another instance', { 'reply-to': Buffer.from('admission-7') }, true],
    ['a prefix of this id', { 'reply-to': Buffer.from('admission-') }, true],
    ['the header as a string', { 'reply-to': 'admission-1' }, false],
    ['the header twice: the first counts', { 'reply-to': [Buffer.from('admission-2'), Buffer.from('admission-1')] }, true],
    ['no recipient header (an older sender): kept, the envelope decides', { other: Buffer.from('x') }, false],
    ['no headers at all (an old message format)', undefined, false],
  ])('%s', (_what, headers, skipped) => {
    expect(forOthers(message(headers))).toBe(skipped);
  });
});

describe('partitionsOnly', () => {
  const cluster = { findTopicPartitionMetadata: () => [0, 1, 2].map((partitionId) => ({ partitionId })) } as unknown as Cluster;
  const logger = { info: () => undefined, error: () => undefined, warn: () => undefined, debug: () => undefined } as never;
  const assigner = partitionsOnly([2, 9])({ cluster, groupId: 'g', logger });

  it('assigns every member only the given partitions that the topic has', async () => {
    const out = await assigner.assign({
      members: [
        { memberId: 'm1', memberMetadata: Buffer.alloc(0) },
        { memberId: 'm2', memberMetadata: Buffer.alloc(0) },
      ],
      topics: ['replies'],
    });
    expect(out.map((a) => [a.memberId, AssignerProtocol.MemberAssignment.decode(a.memberAssignment)?.assignment])).toEqual([
      ['m1', { replies: [2] }],
      ['m2', { replies: [2] }],
    ]);
  });

  it('joins under its own protocol name with the subscribed topics', () => {
    const { name, metadata } = assigner.protocol({ topics: ['replies'] });
    expect(name).toBe(assigner.name);
    expect(AssignerProtocol.MemberMetadata.decode(metadata)?.topics).toEqual(['replies']);
  });
});

describe('KafkaBus and addressed consumers', () => {
  it('refuses batch consumption of an addressed topic (the header check is per message)', async () => {
    const quiet = { info: () => undefined, warn: () => undefined, error: () => undefined };
    const bus = new KafkaBus({ brokers: ['127.0.0.1:1'], clientId: 'spec', logger: quiet });
    const recipient = { id: 'admission-1', partitions: [1], header: 'reply-to' };
    await expect(
      bus.subscribeBatch('dispatchReplies', { groupId: 'g', recipient, batch: { maxSize: 10 } }, async () => undefined),
    ).rejects.toThrow(/one message at a time/);
  });
});
