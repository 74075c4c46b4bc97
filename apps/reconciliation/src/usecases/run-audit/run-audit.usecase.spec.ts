import type { AuditPeriod } from '@gateway/db';
import { DomainError } from '@gateway/domain';
import { RunAudit, RunAuditPorts } from './run-audit.usecase';

/** Repositories that record the period they were asked for and answer fixed figures. */
function fakes() {
  const periods: AuditPeriod[] = [];
  const tallyRanges: Array<[string, string, string | undefined]> = [];
  const none = async (p: AuditPeriod) => (periods.push(p), []);
  const list = async (p: AuditPeriod) => (periods.push(p), { rows: [], truncated: false });
  const audit: RunAuditPorts['audit'] = {
    reservationTotals: none,
    ledgerTotals: async (p) => (periods.push(p), [{ workloadId: 'w', routeId: 'r', items: 2, costMicrousd: 30n }]),
    topicTotals: async (p) => (periods.push(p), [{ workloadId: 'w', routeId: 'r', items: 1, costMicrousd: 10n }]),
    exportTotals: none,
    comparisons: async (p) => (
      periods.push(p),
      {
        truncated: true,
        rows: [
          {
            workloadId: 'w',
            routeId: 'r',
            attemptId: 'a2',
            actionId: 'x2',
            ledger: { entryId: 'l2', costMicrousd: 20n },
            events: [],
            exportLines: [],
          },
        ],
      }
    ),
    unmatchedExportLines: list,
    unresolvedReservations: list,
  };
  const controls: RunAuditPorts['controls'] = {
    countTotals: async (from, to, w) => (tallyRanges.push([from, to, w]), []),
    outputPerRequestBetween: async () => [],
  };
  return { periods, tallyRanges, audit, controls };
}

describe('RunAudit', () => {
  it('reads the UTC days [from, to] as [from 00:00, to + 1 00:00) and lists what the sources disagree on', async () => {
    const f = fakes();
    const { report, format } = await new RunAudit(f.audit, f.controls).execute({ from: '2026-11-23', to: '2026-11-29', workload_id: 'w' });
    expect(format).toBe('json');
    expect(new Set(f.periods.map((p) => `${p.from.toISOString()} ${p.to.toISOString()} ${p.workloadId}`))).toEqual(
      new Set(['2026-11-23T00:00:00.000Z 2026-11-30T00:00:00.000Z w']),
    );
    expect(f.tallyRanges).toEqual([['2026-11-23', '2026-11-29', 'w']]);
    expect(report.rows).toEqual([
      expect.objectContaining({ ledger: { entries: 2, cost_microusd: '30' }, topic: { events: 1, cost_microusd: '10' }, differences: 1 }),
    ]);
    expect(report.differences).toEqual([
      expect.objectContaining({ kind: 'ledger_row_without_event', attempt_id: 'a2', ledger_microusd: '20' }),
    ]);
    expect(report.differences_truncated).toBe(true);
  });

  it.each([
    [{}, 'from'],
    [{ from: '2026-11-23' }, 'to'],
    [{ from: '2026-11-30', to: '2026-11-29' }, 'to'],
    [{ from: '2026-11-01', to: '2026-12-02' }, 'to'],
    [{ from: '2026-11-01', to: '2026-11-31' }, 'to'],
    [{ from: '2026-11-01', to: '2026-11-02', format: 'xlsx' }, 'format'],
  ])('refuses %j as invalid_request naming %s', async (query, param) => {
    const f = fakes();
    const err = await new RunAudit(f.audit, f.controls).execute(query).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DomainError);
    expect(err).toMatchObject({ code: 'invalid_request', param });
    expect(f.periods).toEqual([]);
  });

  it('takes 31 days and CSV', async () => {
    const f = fakes();
    await expect(new RunAudit(f.audit, f.controls).execute({ from: '2026-11-01', to: '2026-12-01', format: 'csv' })).resolves.toMatchObject(
      {
        format: 'csv',
      },
    );
  });
});
