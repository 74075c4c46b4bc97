/**
 * Issue 7 item 2 (dispatch stopped consuming for good after a broker restart): every consumer
 * runs on `KafkaBus`, which must make it consume again by itself, and readiness must say when it
 * does not. Runs against a broker of its own (the first free port pair from KAFKA_PORT + 200, fresh data dir)
 * so stopping it leaves the shared broker of the other integration tests alone.
 */
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { eventually, policyChangedEvent } from '@gateway/testing';
import { KafkaBus } from '@gateway/messaging';
import { freeBrokerPort, OwnBroker, startOwnBroker } from './kafka-broker';

const DATA_DIR = path.resolve(__dirname, `../../../.local/kafka/recovery-${process.pid}-${randomUUID().slice(0, 8)}`);
const quiet = { info: () => undefined, warn: () => undefined, error: () => undefined };

describe('a consumer across a broker restart', () => {
  let broker: OwnBroker | undefined;
  let bus: KafkaBus;

  afterAll(async () => {
    await bus?.disconnect();
    await broker?.stop();
    fs.rmSync(DATA_DIR, { recursive: true, force: true });
  });

  it('reports itself not consuming while the broker is gone, then recovers and consumes what was published after the restart', async () => {
    const port = await freeBrokerPort(Number(process.env.KAFKA_PORT ?? 9092) + 200);
    broker = await startOwnBroker({ port, dataDir: DATA_DIR, fresh: true });
    bus = new KafkaBus({
      brokers: [broker.brokers],
      clientId: 'recovery-int',
      logger: quiet,
      consumerStallMs: 3000,
      restartBackoff: { initialMs: 200, maxMs: 2000 },
    });
    await bus.connect();
    await bus.ensureTopics();
    const seen: string[] = [];
    // The broker is new and the topic empty: reading from the beginning avoids racing the
    // resolution of "latest" on a broker whose partition leaders are still settling.
    await bus.subscribe('policyChanged', { groupId: `recovery-${randomUUID()}`, fromBeginning: true }, async (e) => {
      seen.push(e.entity_id);
    });
    const consuming = () => bus.consumerStatus().every((c) => c.consuming);

    // A new broker may still be settling its partition leaders: publish until it takes it.
    await eventually(
      async () => {
        await bus.publish('policyChanged', [{ key: 'before', value: policyChangedEvent('before', 'recovery') }]);
        return true;
      },
      { timeoutMs: 30_000, intervalMs: 500, what: 'a publish to the new broker' },
    );
    await eventually(() => (seen.includes('before') ? true : undefined), { timeoutMs: 30_000, what: 'message before the restart' });
    expect(consuming()).toBe(true);

    await broker.stop();
    await eventually(() => (consuming() ? undefined : true), { timeoutMs: 30_000, what: 'readiness to report the consumer down' });

    broker = await startOwnBroker({ port, dataDir: DATA_DIR, fresh: false });
    await eventually(() => (consuming() ? true : undefined), { timeoutMs: 90_000, intervalMs: 200, what: 'the consumer to consume again' });
    await eventually(
      async () => {
        await bus.publish('policyChanged', [{ key: 'after', value: policyChangedEvent('after', 'recovery') }]);
        return true;
      },
      { timeoutMs: 30_000, intervalMs: 500, what: 'a publish after the restart' },
    );
    await eventually(() => (seen.includes('after') ? true : undefined), {
      timeoutMs: 30_000,
      what: 'the message published after the restart',
    });
    expect(bus.consumerStatus()).toEqual([expect.objectContaining({ state: 'consuming', consuming: true })]);
  }, 240_000);
});

describe('a consumer that kafkajs crashed for good', () => {
  let bus: KafkaBus;

  afterAll(async () => {
    await bus?.disconnect();
  });

  it('is re-created, reports not consuming meanwhile, and gets the uncommitted message again', async () => {
    const brokers = (process.env.KAFKA_BROKERS ?? '127.0.0.1:9092').split(',');
    bus = new KafkaBus({ brokers, clientId: 'recreate-int', logger: quiet, restartBackoff: { initialMs: 1500, maxMs: 3000 } });
    await bus.connect();
    await bus.ensureTopics();
    const tag = randomUUID();
    const seen: string[] = [];
    const parked: string[] = [];
    let hookCalls = 0;
    await bus.subscribe(
      'policyChanged',
      {
        groupId: `recreate-${tag}`,
        fromBeginning: false,
        // The hook fails once with a TypeError, which kafkajs treats as unrecoverable: the
        // consumer crashes without restart (as with "Failed to find group coordinator").
        onPoison: async (record) => {
          if (++hookCalls === 1) throw new TypeError('hook bug');
          parked.push(record.source_event_id ?? '');
        },
      },
      async (e) => {
        if (e.entity_id === `${tag}-poison`) throw new RangeError('deterministic');
        seen.push(e.entity_id);
      },
    );
    // A first message commits the group's offset, so the re-created consumer resumes there.
    await bus.publish('policyChanged', [{ key: tag, value: policyChangedEvent(`${tag}-first`, 'recovery') }]);
    await eventually(() => (seen.includes(`${tag}-first`) ? true : undefined), { what: 'the first message' });
    const poison = policyChangedEvent(`${tag}-poison`, 'recovery');
    await bus.publish('policyChanged', [
      { key: tag, value: poison },
      { key: tag, value: policyChangedEvent(`${tag}-good`, 'recovery') },
    ]);

    await eventually(() => (bus.consumerStatus()[0].consuming ? undefined : true), { what: 'the crash to show in readiness' });
    await eventually(() => (seen.includes(`${tag}-good`) ? true : undefined), {
      timeoutMs: 30_000,
      what: 'the message after the poison one',
    });
    expect(parked).toEqual([poison.event_id]);
    expect(bus.consumerStatus()[0]).toMatchObject({ consuming: true, restarts: 1, lastError: 'KafkaJSNonRetriableError' });
  });
});
