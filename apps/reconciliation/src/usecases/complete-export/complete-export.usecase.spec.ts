import type { ExportCompletionView, UnresolvedWithoutLine, UsageExportRepository } from '@gateway/db';
import { ReconciliationError } from '../../reconciliation.errors';
import type { ImportUsageCommand } from '../import-usage/import-usage.command';
import type { ImportUsage, ImportUsageResult } from '../import-usage/import-usage.usecase';
import { CompleteUsageExport } from './complete-export.usecase';

const quiet = { info: () => undefined };
const now = new Date('2026-12-03T12:00:00Z');

function fixture(eligible: UnresolvedWithoutLine[], refuse: Set<string> = new Set()) {
  const statements: ExportCompletionView[] = [];
  const asked: Array<{ day: string; routeIds: readonly string[]; openedBefore: Date }> = [];
  const exports: Pick<UsageExportRepository, 'stateCompletion' | 'unresolvedWithoutLine'> = {
    // the first record of the same statement is kept
    stateCompletion: async (c) => statements[0] ?? (statements.push({ ...c, routeIds: [...c.routeIds].sort() }), statements[0]),
    unresolvedWithoutLine: async (q) => {
      asked.push(q);
      return { eligible, withinGrace: 2 };
    },
  };
  const imported: ImportUsageCommand[] = [];
  const importUsage: Pick<ImportUsage, 'execute'> = {
    execute: async (cmd: ImportUsageCommand): Promise<ImportUsageResult> => {
      imported.push(cmd);
      if (refuse.has(cmd.caseId)) throw new ReconciliationError('case_already_resolved', `case ${cmd.caseId} is already resolved`);
      return {
        case_id: cmd.caseId,
        status: 'resolved',
        action_id: 'act',
        attempt_id: 'at',
        ledger_entry_id: 'le',
        usage_source: 'provider_export',
        price_revision: 'price',
        cost_microusd: '0',
        cost_microusd_by_category: { input: '0', cached_input: '0', output: '0', reasoning: '0' },
        unpriced: [],
        settled_microusd: '0',
        released_microusd: '700',
        overrun_microusd: '0',
        reservation_status: 'released',
      };
    },
  };
  let n = 0;
  const ids = { next: () => `id-${++n}` };
  const useCase = new CompleteUsageExport(exports, importUsage, { graceMs: 60_000 }, ids, quiet);
  return { useCase, statements, asked, imported };
}

const attempt = (i: number): UnresolvedWithoutLine => ({
  attemptId: `at-${i}`,
  caseId: `case-${i}`,
  caseReason: 'orphaned_attempt',
  providerRequestId: null,
  exposureMicrousd: 700n,
});

describe('CompleteUsageExport', () => {
  const cmd = { day: '2026-12-03', routeIds: ['r-b', 'r-a'], exportDigest: `sha256:${'0'.repeat(64)}`, actor: 'fin' };

  it('settles each eligible attempt at zero through the single-case import, naming the statement', async () => {
    const f = fixture([attempt(1), attempt(2)]);
    const report = await f.useCase.execute(cmd, now);
    expect(f.asked).toEqual([{ day: '2026-12-03', routeIds: ['r-a', 'r-b'], openedBefore: new Date('2026-12-03T11:59:00Z') }]);
    expect(f.imported.map((c) => [c.caseId, c.providerRequestId, c.usage.inputTokens, c.usage.outputTokens, c.completion])).toEqual([
      ['case-1', null, 0, 0, { statementId: 'id-1', exportDigest: cmd.exportDigest, day: '2026-12-03' }],
      ['case-2', null, 0, 0, { statementId: 'id-1', exportDigest: cmd.exportDigest, day: '2026-12-03' }],
    ]);
    expect(report).toMatchObject({
      statement_id: 'id-1',
      route_ids: ['r-a', 'r-b'],
      stated_by: 'fin',
      within_grace: 2,
      refused: [],
      settled_at_zero: [
        { attempt_id: 'at-1', case_id: 'case-1', case_reason: 'orphaned_attempt', released_microusd: '700' },
        { attempt_id: 'at-2', case_id: 'case-2', case_reason: 'orphaned_attempt', released_microusd: '700' },
      ],
    });
  });

  it('lists a case that refused (changed meanwhile) and goes on with the rest', async () => {
    const f = fixture([attempt(1), attempt(2)], new Set(['case-1']));
    const report = await f.useCase.execute(cmd, now);
    expect(report.refused).toEqual([
      { attempt_id: 'at-1', case_id: 'case-1', detail: 'case_already_resolved: case case-1 is already resolved' },
    ]);
    expect(report.settled_at_zero.map((z) => z.attempt_id)).toEqual(['at-2']);
  });

  it('stating it again reports the first record (author and time) and settles what is eligible now', async () => {
    const f = fixture([]);
    await f.useCase.execute(cmd, now);
    const again = await f.useCase.execute({ ...cmd, actor: 'ops' }, new Date('2026-12-03T13:00:00Z'));
    expect(again).toMatchObject({ statement_id: 'id-1', stated_by: 'fin', stated_at: now.toISOString(), settled_at_zero: [] });
  });
});
