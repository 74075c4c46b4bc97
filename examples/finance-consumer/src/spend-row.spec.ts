import { settledEvent as event } from './settled-event.fixture';
import { calendarDay, NO_WORKLOAD, spendRowOf } from './spend-row';

describe('spendRowOf', () => {
  it('keys by attempt, days by settled_at in UTC, keeps the cost exact beyond 2^53', () => {
    expect(spendRowOf(event())).toEqual({
      settlementKey: 'attempt:att-1',
      eventId: '6f1c1a4e-2d7b-4c55-9a51-1f0d3c2b9e10',
      workloadId: 'wl-a',
      day: '2026-12-01',
      costMicrousd: 9007199254740993n,
    });
  });

  it('a settled_at with an offset lands on its UTC day', () => {
    expect(spendRowOf(event({ settled_at: '2026-12-02T00:30:00+02:00' })).day).toBe('2026-12-01');
  });

  it('an event without attempt or workload is kept under its event id and the (none) workload', () => {
    const row = spendRowOf(event({ attempt_id: null, workload_id: null }));
    expect(row.settlementKey).toBe('event:6f1c1a4e-2d7b-4c55-9a51-1f0d3c2b9e10');
    expect(row.workloadId).toBe(NO_WORKLOAD);
  });
});

describe('calendarDay', () => {
  it.each([
    ['2026-12-01', '2026-12-01'],
    ['2024-02-29', '2024-02-29'],
    ['2026-02-29', null],
    ['2026-13-01', null],
    ['2026-12-1', null],
    ['2026-12-01T00:00:00Z', null],
    [undefined, null],
    [['2026-12-01'], null],
  ])('%p → %p', (input, expected) => {
    expect(calendarDay(input)).toBe(expected);
  });
});
