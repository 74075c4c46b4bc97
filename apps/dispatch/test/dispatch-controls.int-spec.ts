/**
 * A control record that does not match `gateway.dispatch.controls.v1`'s schema (hostile or
 * another version's) is parked on the dead-letter topic with ids only, acts on no stream, and does
 * not hold up the stops behind it. Real Kafka; dispatch's own consumer class and `RelayStops`.
 */
import { randomUUID } from 'node:crypto';
import { DeadLetterV1, DispatchControlV1, Topics } from '@gateway/contracts';
import { KafkaBus } from '@gateway/messaging';
import { systemClock } from '@gateway/service-kit';
import { eventually } from '@gateway/testing';
import { DispatchControlsConsumer } from '../src/consumers/dispatch-controls.consumer';
import { RelayStops } from '../src/usecases/run-attempt/relay-stops';

const BROKERS = process.env.KAFKA_BROKERS ?? '127.0.0.1:9092';
const quiet = { info: () => undefined, warn: () => undefined, error: () => undefined };
const group = `controls-int-${randomUUID()}`;

let bus: KafkaBus;
const stops = new RelayStops();
const deadLetters: DeadLetterV1[] = [];

const stop = (actionId: string): DispatchControlV1 => ({
  event_id: randomUUID(),
  action_id: actionId,
  kind: 'stop_relay',
  reason: 'client_left',
  timestamp: new Date().toISOString(),
});
const stopped = (actionId: string) => stops.stopped(actionId, Date.now());

beforeAll(async () => {
  bus = new KafkaBus({ brokers: BROKERS.split(','), clientId: `controls-int-${process.pid}`, logger: quiet });
  await bus.connect();
  await bus.ensureTopics();
  await bus.subscribe('deadLetters', { groupId: `controls-int-dl-${randomUUID()}`, fromBeginning: false }, async (d) => {
    deadLetters.push(d);
  });
  const consumer = new DispatchControlsConsumer(stops, systemClock);
  await bus.subscribe('dispatchControls', { groupId: group, fromBeginning: false }, async (c) => consumer.control(c));
  // Both consumers read from the latest offset: publish probes until one has been read by each.
  const probe = `probe-${randomUUID()}`;
  await eventually(
    async () => {
      await bus.publish('dispatchControls', [{ key: probe, value: stop(probe) }]);
      await bus.publishRaw(Topics.dispatchControls.name, [{ key: probe, value: '{' }]);
      return stopped(probe) && deadLetters.some((d) => d.key === probe) ? true : undefined;
    },
    { timeoutMs: 60_000, intervalMs: 1000, what: 'both consumers reading' },
  );
}, 90_000);

afterAll(async () => {
  await bus?.disconnect();
});

describe('the dispatch controls topic', () => {
  it('parks each malformed stop with ids only, acts on none of them, and still applies the stop behind them', async () => {
    const valid = stop(`a-${randomUUID()}`);
    const malformed: Array<{ name: string; actionId: string; value: string }> = [
      { name: 'an action id longer than 64', actionId: 'x'.repeat(65), value: JSON.stringify({ ...stop('x'.repeat(65)) }) },
      { name: 'an unknown kind', actionId: `k-${randomUUID()}`, value: '' },
      { name: 'an unknown reason', actionId: `r-${randomUUID()}`, value: '' },
      { name: 'no event id', actionId: `e-${randomUUID()}`, value: '' },
      { name: 'not JSON', actionId: `j-${randomUUID()}`, value: '' },
    ];
    malformed[1].value = JSON.stringify({ ...stop(malformed[1].actionId), kind: 'cancel_attempt', prompt: 'CANARY' });
    malformed[2].value = JSON.stringify({ ...stop(malformed[2].actionId), reason: 'CANARY' });
    malformed[3].value = JSON.stringify({ ...stop(malformed[3].actionId), event_id: undefined });
    malformed[4].value = `{"action_id":"${malformed[4].actionId}","kind":"stop_relay" CANARY`;

    await bus.publishRaw(Topics.dispatchControls.name, [
      ...malformed.map((m) => ({ key: m.actionId, value: m.value })),
      { key: valid.action_id, value: JSON.stringify(valid) },
    ]);

    await eventually(() => (stopped(valid.action_id) ? true : undefined), { what: 'the valid stop behind the malformed ones' });
    for (const m of malformed) {
      const parked = await eventually(() => deadLetters.find((d) => d.key === m.actionId), { what: `${m.name} on the dead-letter topic` });
      expect({ name: m.name, parked }).toMatchObject({
        name: m.name,
        parked: { topic: Topics.dispatchControls.name, reason_class: 'schema_invalid', consumer_group: group },
      });
      expect(JSON.stringify(parked)).not.toContain('CANARY');
      expect(stopped(m.actionId)).toBe(false);
    }
    expect(deadLetters.some((d) => d.key === valid.action_id)).toBe(false);
  }, 60_000);
});
