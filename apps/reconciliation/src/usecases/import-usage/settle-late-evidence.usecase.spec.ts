import type { LateEvidence } from '@gateway/contracts';
import { ReconciliationError } from '../../reconciliation.errors';
import type { ImportUsageCommand } from './import-usage.command';
import type { ImportUsage } from './import-usage.usecase';
import { LATE_EVIDENCE_ACTOR, LateEvidenceCases, SettleLateEvidence } from './settle-late-evidence.usecase';

const EVIDENCE: LateEvidence = {
  provider_request_id: 'resp-1',
  usage_source: 'stream_final_chunk',
  output_includes_reasoning: false,
  input_tokens: 10,
  cached_input_tokens: 0,
  output_tokens_total: 4,
  reasoning_tokens: 3,
  offered_at: '2026-12-07T04:00:00.000Z',
};

function setup(importFails: (caseId: string) => Error | null) {
  const aside: Array<[string, string]> = [];
  const commands: ImportUsageCommand[] = [];
  const cases: LateEvidenceCases = {
    withLateEvidence: async () => [
      { caseId: 'c-1', evidence: EVIDENCE },
      { caseId: 'c-2', evidence: { unreadable: 'input_tokens: expected number' } },
      { caseId: 'c-3', evidence: EVIDENCE },
      { caseId: 'c-4', evidence: EVIDENCE },
    ],
    setLateEvidenceAside: async (caseId, why) => void aside.push([caseId, why]),
  };
  const importUsage = {
    execute: async (cmd: ImportUsageCommand) => {
      const err = importFails(cmd.caseId);
      if (err) throw err;
      commands.push(cmd);
    },
  } as unknown as ImportUsage;
  const late = new SettleLateEvidence(cases, importUsage, { error: () => undefined });
  return { late, aside, commands };
}

describe('SettleLateEvidence', () => {
  it('settles each readable case through the import with the response as its source, and sets the rest aside', async () => {
    const f = setup((id) =>
      id === 'c-3'
        ? new ReconciliationError('provider_request_mismatch', 'another request')
        : id === 'c-4'
          ? new RangeError('reasoningTokens (9) cannot exceed outputTokens (4) when output includes reasoning')
          : null,
    );
    expect(await f.late.execute(new Date(), 10)).toBe(1);
    expect(f.commands).toEqual([
      {
        caseId: 'c-1',
        providerRequestId: 'resp-1',
        usage: expect.objectContaining({ outputTokens: 4, reasoningTokens: 3, outputIncludesReasoning: false }),
        actor: LATE_EVIDENCE_ACTOR,
        late: { source: 'stream_final_chunk', offeredAt: EVIDENCE.offered_at },
      },
    ]);
    expect(f.aside).toEqual([
      ['c-2', 'unreadable: input_tokens: expected number'],
      ['c-3', 'provider_request_mismatch: another request'],
      // a failure that would repeat on every pass holds back no other case
      ['c-4', 'refused: reasoningTokens (9) cannot exceed outputTokens (4) when output includes reasoning'],
    ]);
  });

  it('a database out of service stops the run and sets nothing aside: the next sweep tries again', async () => {
    const f = setup((id) => (id === 'c-1' ? new Error('Connection terminated unexpectedly') : null));
    await expect(f.late.execute(new Date(), 10)).rejects.toThrow('Connection terminated');
    expect(f.aside).toEqual([]);
  });
});
