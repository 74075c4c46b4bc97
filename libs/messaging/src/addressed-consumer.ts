import { AssignerProtocol, KafkaMessage, PartitionAssigner } from 'kafkajs';

/*
 * Consuming an `addressed` topic (libs/contracts): one receiver instance reads only the partition
 * its messages are written to, and skips, unparsed, any there that name another instance.
 */

/**
 * A partition assigner that hands every member of the group the given partitions of each topic
 * it subscribes to, and nothing else: manual assignment (which kafkajs lacks) for a consumer
 * group of one instance (`perInstance`). The broker takes whatever the group leader assigns; a
 * second member (the same instance restarting before its old session expired) gets the same
 * partitions, as two broadcast readers would. Partitions the topic does not have are left out.
 */
export function partitionsOnly(partitions: number[]): PartitionAssigner {
  return ({ cluster }) => ({
    name: 'GatewayPartitionsOnly',
    version: 0,
    protocol: ({ topics }) => ({
      name: 'GatewayPartitionsOnly',
      metadata: AssignerProtocol.MemberMetadata.encode({ version: 0, topics, userData: Buffer.alloc(0) }),
    }),
    assign: ({ members, topics }) => {
      const assignment: Record<string, number[]> = {};
      for (const topic of topics) {
        const existing = new Set(cluster.findTopicPartitionMetadata(topic).map((p) => p.partitionId));
        assignment[topic] = partitions.filter((p) => existing.has(p));
      }
      return Promise.resolve(
        members.map((m) => ({
          memberId: m.memberId,
          memberAssignment: AssignerProtocol.MemberAssignment.encode({ version: 0, assignment, userData: Buffer.alloc(0) }),
        })),
      );
    },
  });
}

/** True for a message whose recipient header names another instance (compared as bytes, nothing parsed). */
export function addressedElsewhere(recipient: { id: string; header: string }): (message: KafkaMessage) => boolean {
  const mine = Buffer.from(recipient.id, 'utf8');
  return (message) => {
    const value = message.headers?.[recipient.header];
    if (value === undefined) return false;
    const first = Array.isArray(value) ? value[0] : value;
    return Buffer.isBuffer(first) ? !first.equals(mine) : String(first) !== recipient.id;
  };
}
