/**
 * A handler that outlasts the group's session timeout (6 s) must not cost the consumer its
 * membership. Dispatch's and admission's consumers take one message at a time; a statement on a
 * connection that will never be answered holds the handler for the database's answer bound (30 s;
 * 12 s in chaos). Without heartbeats meanwhile the coordinator took the member for dead, the group
 * rebalanced (every member's partitions paused) and the message came again: in a chaos run the
 * dispatch consumer rejoined only after its commands had expired. Against the shared broker.
 */
import { randomUUID } from 'node:crypto';
import { eventually, policyChangedEvent } from '@gateway/testing';
import { KafkaBus } from '@gateway/messaging';

const quiet = { info: () => undefined, warn: () => undefined, error: () => undefined };
const brokers = (process.env.KAFKA_BROKERS ?? '127.0.0.1:9092').split(',');

describe('a handler longer than the session timeout', () => {
  const joins = { n: 0 };
  const bus = new KafkaBus({
    brokers,
    clientId: `membership-${randomUUID().slice(0, 6)}`,
    logger: quiet,
    requestCounter: { inc: ({ client, api }) => (client === 'consumer' && api === 'JoinGroup' ? (joins.n += 1) : undefined) },
  });
  afterAll(() => bus.disconnect());

  it('keeps the consumer in its group: no rejoin, the message handled once', async () => {
    await bus.connect();
    await bus.ensureTopics();
    const tag = randomUUID();
    const seen: string[] = [];
    await bus.subscribe('policyChanged', { groupId: `membership-${tag}`, fromBeginning: false }, async (e) => {
      if (!e.entity_id.startsWith(tag)) return;
      seen.push(e.entity_id);
      // as long as a statement waiting for a dead connection's bound, past the 6 s session timeout
      if (e.entity_id === `${tag}-slow`) await new Promise((r) => setTimeout(r, 9_000));
    });
    await bus.publish('policyChanged', [{ key: tag, value: policyChangedEvent(`${tag}-first`, 'membership') }]);
    await eventually(() => (seen.includes(`${tag}-first`) ? true : undefined), { timeoutMs: 30_000, what: 'the first message' });
    const joinsBefore = joins.n;
    // one key: the same partition, in order
    await bus.publish('policyChanged', [
      { key: tag, value: policyChangedEvent(`${tag}-slow`, 'membership') },
      { key: tag, value: policyChangedEvent(`${tag}-after`, 'membership') },
    ]);
    await eventually(() => (seen.includes(`${tag}-after`) ? true : undefined), {
      timeoutMs: 40_000,
      what: 'the message after the slow one',
    });
    // a rebalance would show as a JoinGroup, and the uncommitted slow message handled again
    await new Promise((r) => setTimeout(r, 3_000));
    expect(joins.n).toBe(joinsBefore);
    expect(seen).toEqual([`${tag}-first`, `${tag}-slow`, `${tag}-after`]);
  }, 90_000);
});
