import { randomUUID } from 'node:crypto';
import { Topics } from '@gateway/contracts';
import type { AlertRow } from '@gateway/db';
import { DayTally, DomainError, EMPTY_TALLY } from '@gateway/domain';
import { ControlsPorts, controlsDay, RunDailyControls } from './run-daily-controls.usecase';

const NOW = new Date('2026-11-09T03:00:00Z');
const DAY = '2026-11-08';
type Tallies = Map<string, Map<string, Map<string, DayTally>>>;

/** In-memory controls storage: tallies by day, stored alerts unique per (day, workload, route, kind). */
class FakeControls implements ControlsPorts {
  readonly alerts: AlertRow[] = [];
  readonly published: unknown[] = [];
  tallyRows: Tallies = new Map();
  thresholds: unknown = null;
  exceptions: Awaited<ReturnType<ControlsPorts['exceptionUsage']>> = [];
  askedRange: [string, string] | null = null;

  async tallies(from: string, to: string) {
    this.askedRange = [from, to];
    return new Map([...this.tallyRows].filter(([d]) => d >= from && d <= to));
  }
  async workloads(ids: readonly string[]) {
    return new Map(
      ids.filter((id) => id.startsWith('wl-')).map((id) => [id, { perCandidateOutputCeiling: 500, thresholds: this.thresholds }]),
    );
  }
  async outputPerRequest() {
    return [];
  }
  async exceptionUsage() {
    return this.exceptions;
  }
  async effectiveCounts() {
    return [];
  }
  async unresolvedExposure() {
    return [];
  }
  async listAlerts(q: { day?: string; workloadId?: string }) {
    return this.alerts.filter((a) => (!q.day || a.day === q.day) && (!q.workloadId || a.workloadId === q.workloadId));
  }
  async recordAlerts(rows: readonly AlertRow[]) {
    const added = rows.filter(
      (r) => !this.alerts.some((a) => a.day === r.day && a.workloadId === r.workloadId && a.routeId === r.routeId && a.kind === r.kind),
    );
    this.alerts.push(...added);
    this.published.push(...added.map((a) => Topics.controlAlerts.schema.parse(a.details)));
    return added;
  }

  set(day: string, workloadId: string, routeId: string, t: Partial<DayTally>) {
    const byW = this.tallyRows.get(day) ?? new Map<string, Map<string, DayTally>>();
    byW.set(workloadId, new Map([...(byW.get(workloadId) ?? []), [routeId, { ...EMPTY_TALLY, ...t }]]));
    this.tallyRows.set(day, byW);
  }
}

const ids = { next: () => randomUUID() };

function seedShift(fake: FakeControls, workloadId = 'wl-a') {
  for (let i = 1; i <= 7; i++) fake.set(`2026-11-0${i}`, workloadId, 'route-1', { requested: { omitted: 20, '1': 20 }, admitted: 40 });
  fake.set(DAY, workloadId, 'route-1', { requested: { omitted: 100, '3': 100 }, admitted: 200 });
}

describe('RunDailyControls', () => {
  it('sums the 7 days before into the baseline and raises one count_shift, published with sanitised fields', async () => {
    const fake = new FakeControls();
    seedShift(fake);
    fake.set('2026-10-31', 'wl-a', 'route-1', { requested: { '3': 10_000 }, admitted: 10_000 }); // 8 days before: outside the baseline
    const r = await new RunDailyControls(fake, ids).execute(DAY, NOW);
    expect(fake.askedRange).toEqual(['2026-11-01', DAY]);
    expect(r.added.map((a) => [a.workloadId, a.routeId, a.kind])).toEqual([['wl-a', 'route-1', 'count_shift']]);
    expect(fake.published).toEqual([
      expect.objectContaining({
        day: DAY,
        workload_id: 'wl-a',
        route_id: 'route-1',
        kind: 'count_shift',
        day_total: 200,
        baseline_total: 280,
      }),
    ]);
    expect((fake.published[0] as { grew: { category: string }[] }).grew[0].category).toBe('3');
  });

  it('is idempotent: a second run of the day adds no alert and publishes nothing', async () => {
    const fake = new FakeControls();
    seedShift(fake);
    const run = new RunDailyControls(fake, ids);
    await run.execute(DAY, NOW);
    const again = await run.execute(DAY, NOW);
    expect(again).toMatchObject({ findings: 1, added: [] });
    expect(fake.alerts).toHaveLength(1);
    expect(fake.published).toHaveLength(1);
  });

  it('uses the workload’s stored thresholds, and the defaults when the stored document is invalid', async () => {
    const fake = new FakeControls();
    seedShift(fake);
    fake.thresholds = { shift: { min_sample: 1000 } };
    expect((await new RunDailyControls(fake, ids).execute(DAY, NOW)).findings).toBe(0);
    fake.thresholds = { shift: { min_sample: -1 } };
    expect((await new RunDailyControls(fake, ids).execute(DAY, NOW)).findings).toBe(1);
  });

  it('skips decisions of workloads that no longer exist, and raises the exception-budget alert', async () => {
    const fake = new FakeControls();
    seedShift(fake, 'gone');
    fake.exceptions = [
      {
        exceptionId: 'ex-1',
        workloadId: 'wl-b',
        routeId: 'route-9',
        budgetMicrousd: 100n,
        spentMicrousd: 90n,
        expiresAt: new Date('2026-11-20T00:00:00Z'),
      },
    ];
    const r = await new RunDailyControls(fake, ids).execute(DAY, NOW);
    expect(r.added.map((a) => [a.workloadId, a.routeId, a.kind])).toEqual([['wl-b', 'route-9', 'exception_budget']]);
    expect(fake.published[0]).toMatchObject({
      exceptions: [{ exception_id: 'ex-1', share: 0.9, spent_microusd: '90', budget_microusd: '100', days_to_expiry: 11 }],
    });
  });

  it('reports the day per route with its baseline and stored alerts', async () => {
    const fake = new FakeControls();
    seedShift(fake);
    const run = new RunDailyControls(fake, ids);
    await run.execute(DAY, NOW);
    const report = await run.report(DAY);
    expect(report.routes).toEqual([
      expect.objectContaining({
        workload_id: 'wl-a',
        route_id: 'route-1',
        requested_counts: { omitted: 100, '3': 100 },
        baseline_requested_counts: { omitted: 140, '1': 140 },
      }),
    ]);
    expect(report.alerts.map((a) => a.kind)).toEqual(['count_shift']);
  });
});

describe('controlsDay', () => {
  it('defaults to yesterday and accepts calendar days up to today (a partial day)', () => {
    expect(controlsDay(undefined, NOW)).toBe(DAY);
    expect(controlsDay('2026-11-08', NOW)).toBe(DAY);
    expect(controlsDay('2026-11-09', NOW)).toBe('2026-11-09');
    for (const bad of ['2026-11-10', '2027-01-01', '2026-02-30', 'yesterday', 20261108, '2026-11-08T00:00:00Z'])
      expect(() => controlsDay(bad, NOW)).toThrow(DomainError);
  });
});
