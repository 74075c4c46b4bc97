import { randomUUID } from 'node:crypto';
import { Admin, AssignerProtocol, Kafka, logLevel } from 'kafkajs';
import { addressTo, DispatchReplyEnvelopeV1, RECIPIENT_HEADER, Topics } from '@gateway/contracts';
import { KafkaBus } from '../src/kafka-bus';

/**
 * Replies addressed per receiver, against the real broker: each receiver's group holds only its
 * own partition of the replies topic, and a receiver that shares its partition with another
 * (ids `…-1` and `…-7` over 6 partitions) hands its handler only the replies addressed to it.
 */
const brokers = (process.env.KAFKA_BROKERS ?? '127.0.0.1:9092').split(',');
const quiet = { info: () => undefined, warn: () => undefined, error: () => undefined };

describe('replies addressed per receiver instance', () => {
  const run = randomUUID().slice(0, 8);
  const ids = [`int-${run}-1`, `int-${run}-7`, `int-${run}-2`];
  const bus = new KafkaBus({ brokers, clientId: `int-addressed-${run}`, logger: quiet });
  const seen = new Map<string, Array<{ action: string; partition: number }>>(ids.map((id) => [id, []]));
  /** resolves once a receiver has handled its last reply (`end-…`), so all before it on its partition too */
  const ended = new Map<string, { promise: Promise<void>; resolve: () => void }>(
    ids.map((id) => {
      let resolve!: () => void;
      const promise = new Promise<void>((r) => (resolve = r));
      return [id, { promise, resolve }];
    }),
  );
  let admin: Admin;

  beforeAll(async () => {
    await bus.connect();
    await bus.ensureTopics();
    admin = new Kafka({ clientId: `int-addressed-admin-${run}`, brokers, logLevel: logLevel.NOTHING }).admin();
    await admin.connect();
    for (const id of ids) {
      const { partition } = addressTo('dispatchReplies', id);
      await bus.subscribe(
        'dispatchReplies',
        { groupId: `int-addressed-${id}`, fromBeginning: false, recipient: { id, partitions: [partition], header: RECIPIENT_HEADER } },
        async (env, meta) => {
          seen.get(id)!.push({ action: `${env.reply_to}/${env.action_id}`, partition: meta.partition });
          if (env.action_id.startsWith('end-')) ended.get(id)!.resolve();
        },
      );
    }
  });

  afterAll(async () => {
    await admin.disconnect();
    await bus.disconnect();
  });

  const reply = (to: string, actionId: string): DispatchReplyEnvelopeV1 => ({
    event_id: randomUUID(),
    action_id: actionId,
    reply_to: to,
    // the bus never opens the body; any well-formed ciphertext shape will do
    body: { alg: 'A256GCM', kid: 'k', iv: 'aXY=', tag: 'dGFn', ct: 'Y3Q=' },
  });

  it('each group is assigned only its receiver partition', async () => {
    for (const id of ids) {
      const { groups } = await admin.describeGroups([`int-addressed-${id}`]);
      const assigned = groups[0].members.map((m) => AssignerProtocol.MemberAssignment.decode(m.memberAssignment)?.assignment);
      expect(assigned).toEqual([{ [Topics.dispatchReplies.name]: [addressTo('dispatchReplies', id).partition] }]);
    }
  });

  it('every receiver gets exactly the replies addressed to it, also on a shared partition', async () => {
    const sent = ids.flatMap((to) => ['a', 'b', 'c', 'end'].map((n) => ({ to, actionId: `${n}-${randomUUID()}` })));
    // interleaved, so the receivers sharing partition 1 each read past the other's replies
    for (const { to, actionId } of sent) {
      await bus.publish('dispatchReplies', [{ key: actionId, value: reply(to, actionId), ...addressTo('dispatchReplies', to) }]);
    }
    await Promise.all(ids.map((id) => ended.get(id)!.promise));
    for (const id of ids) {
      const mine = sent.filter((s) => s.to === id).map((s) => `${id}/${s.actionId}`);
      expect(seen.get(id)!.map((s) => s.action)).toEqual(mine);
      expect(new Set(seen.get(id)!.map((s) => s.partition))).toEqual(new Set([addressTo('dispatchReplies', id).partition]));
    }
    expect(addressTo('dispatchReplies', ids[0]).partition).toBe(addressTo('dispatchReplies', ids[1]).partition);
  }, 20_000);
});
