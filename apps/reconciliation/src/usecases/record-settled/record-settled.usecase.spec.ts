import { randomUUID } from 'node:crypto';
import { usageSettledEvent, type SettledEventFact } from '@gateway/db';
import { ledgerRow } from '@gateway/testing';
import { RecordSettled, settledEventFact } from './record-settled.usecase';

describe('RecordSettled', () => {
  const row = ledgerRow({
    workloadId: 'w',
    routeId: 'r',
    priceRevisionId: 'p',
    settledAt: new Date('2026-11-24T10:00:00.000Z'),
    evidence: { kind: 'attested', amountMicrousd: 1234n, caseId: 'c', attestedBy: 'ops', reason: 'test' },
  });

  it('keeps the ids, workload × route, cost and settled time of an event, nothing else', () => {
    const eventId = randomUUID();
    expect(settledEventFact(usageSettledEvent(row, eventId))).toEqual({
      eventId,
      attemptId: row.attemptId,
      actionId: row.actionId,
      workloadId: 'w',
      routeId: 'r',
      costMicrousd: 1234n,
      settledAt: new Date('2026-11-24T10:00:00.000Z'),
    });
  });

  it('hands a batch to the store in one call with the receiving time', async () => {
    const calls: Array<{ facts: readonly SettledEventFact[]; at: Date }> = [];
    const now = new Date('2026-11-30T00:00:00.000Z');
    const record = new RecordSettled({ recordSettled: async (facts, at) => (calls.push({ facts, at }), facts.length) }, { now: () => now });
    const events = [usageSettledEvent(row, randomUUID()), usageSettledEvent(row, randomUUID())];
    expect(await record.execute(events)).toBe(2);
    expect(calls).toEqual([{ facts: events.map(settledEventFact), at: now }]);
  });
});
