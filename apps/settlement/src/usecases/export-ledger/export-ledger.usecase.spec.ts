import type { LedgerQuery, LedgerQueryRepository, LedgerRow, SettlementEvidence } from '@gateway/db';
import { ledgerRow } from '@gateway/testing';
import { csvRow } from '@gateway/domain';
import { ExportLedger } from './export-ledger.usecase';

/** Keyset paging over rows in memory, newest first, counting reads. */
class FakeLedger implements Pick<LedgerQueryRepository, 'page'> {
  readonly reads: LedgerQuery[] = [];
  constructor(private readonly rows: LedgerRow[]) {}

  async page(q: LedgerQuery): Promise<LedgerRow[]> {
    this.reads.push(q);
    const key = (r: LedgerRow) => `${r.settledAt.toISOString()}|${r.id}`;
    return [...this.rows]
      .sort((a, b) => key(b).localeCompare(key(a)))
      .filter((r) => q.after === null || key(r) < `${q.after.settledAt.toISOString()}|${q.after.id}`)
      .slice(0, q.limit);
  }
}

const USAGE_OF_ROW = { inputTokens: 10, cachedInputTokens: 0, outputTokens: 5, reasoningTokens: 0, outputIncludesReasoning: true };
const ZERO_COST = {
  ...{ input: 0n, cachedInput: 0n, output: 0n, reasoning: 0n, total: 0n, cacheWrite: 0n, audioInput: 0n, audioOutput: 0n },
  ...{ imageOutput: 0n, fees: 0n, feeLines: [], contextTier: null, serviceTier: 'default', unpriced: [] },
};

const USAGE: SettlementEvidence = {
  kind: 'usage',
  source: 'provider_response',
  usage: { inputTokens: 10, cachedInputTokens: 0, outputTokens: 5, reasoningTokens: 0, outputIncludesReasoning: true },
  cost: {
    ...{ input: 25n, cachedInput: 0n, output: 9_007_199_254_740_993n, reasoning: 0n, total: 9_007_199_254_741_018n },
    ...{
      cacheWrite: 0n,
      audioInput: 0n,
      audioOutput: 0n,
      imageOutput: 0n,
      fees: 0n,
      feeLines: [],
      contextTier: null,
      serviceTier: 'default',
      unpriced: [],
    },
  },
};

function row(i: number, evidence: SettlementEvidence = USAGE): LedgerRow {
  return ledgerRow({
    workloadId: 'wl',
    routeId: 'r',
    priceRevisionId: 'p',
    settledAt: new Date(Date.UTC(2026, 10, 20, 0, 0, i % 7)),
    evidence,
  });
}

async function body(chunks: AsyncIterable<string>): Promise<string> {
  let text = '';
  for await (const c of chunks) text += c;
  return text;
}

const cmd = { workloadId: null, from: null, to: null, format: null };

describe('ExportLedger', () => {
  it('streams every row once in keyset batches, newest first, money as integer strings (NDJSON)', async () => {
    const rows = Array.from({ length: 23 }, (_, i) => row(i));
    const ledger = new FakeLedger(rows);
    const out = await new ExportLedger(ledger).execute(cmd, 5);
    expect(out).toMatchObject({ format: 'ndjson', contentType: 'application/x-ndjson' });
    // the first batch is read before anything is sent; the rest only as the body is consumed
    expect(ledger.reads).toHaveLength(1);
    const lines = (await body(out.chunks)).split('\n');
    expect(lines.pop()).toBe('');
    const entries = lines.map((l) => JSON.parse(l) as { ledger_entry_id: string; cost_microusd: string });
    const all = await ledger.page({ ...ledger.reads[0], limit: 1000 });
    expect(entries.map((e) => e.ledger_entry_id)).toEqual(all.map((r) => r.id));
    expect(entries[0]).toMatchObject({
      cost_microusd: '9007199254741018',
      cost_microusd_by_category: { input: '25', cached_input: '0', output: '9007199254740993', reasoning: '0' },
    });
    // 23 rows in batches of 5: five reads (the last one short), plus the comparison read above
    expect(ledger.reads).toHaveLength(5 + 1);
  });

  it('writes CSV with a header row, quoting, empty nulls and flattened category costs', async () => {
    const ledger = new FakeLedger([
      row(1, {
        kind: 'attested',
        amountMicrousd: 9_007_199_254_741_018n,
        caseId: 'c1',
        attestedBy: 'ops, "night"',
        reason: '=HYPERLINK("x")\nline 2',
      }),
    ]);
    const out = await new ExportLedger(ledger).execute({ ...cmd, format: 'csv' });
    expect(out.contentType).toBe('text/csv; charset=utf-8');
    const [header, line, end] = (await body(out.chunks)).split('\r\n');
    const usage = (await body((await new ExportLedger(new FakeLedger([row(2)])).execute({ ...cmd, format: 'csv' })).chunks)).split(
      '\r\n',
    )[1];
    expect(usage).toContain(',9007199254741018,25,0,9007199254740993,0,,,,');
    expect(header.split(',')).toContain('cost_output_microusd');
    expect(line).toContain(',"ops, ""night""","\'=HYPERLINK(""x"")\nline 2",c1,');
    expect(line).toContain(',,1,1,'); // requested (null) / effective / returned
    expect(line).toContain(',9007199254741018,,,,,"ops');
    expect(end).toBe('');
  });

  it('carries the billable detail in both formats: tier, category lines, fee lines (CSV: last columns, zero lines as 0)', async () => {
    const detailed: SettlementEvidence = {
      kind: 'usage',
      source: 'provider_response',
      usage: { ...USAGE_OF_ROW, cacheWriteInputTokens: 4, audioInputTokens: 2, serviceTier: 'priority', featureCalls: { web_search: 2 } },
      cost: {
        ...ZERO_COST,
        input: 8n,
        cacheWrite: 5n,
        audioInput: 6n,
        output: 20n,
        fees: 2000n,
        total: 2039n,
        feeLines: [{ feature: 'web_search', calls: 2, microusd: 2000n }],
        contextTier: 8,
        serviceTier: 'priority',
      },
    };
    const entry = JSON.parse(await body((await new ExportLedger(new FakeLedger([row(1, detailed)])).execute(cmd)).chunks));
    expect(entry).toMatchObject({
      cache_write_input_tokens: 4,
      audio_input_tokens: 2,
      audio_output_tokens: 0,
      image_output_tokens: 0,
      cost_microusd: '2039',
      cost_microusd_by_category: {
        input: '8',
        cached_input: '0',
        output: '20',
        reasoning: '0',
        cache_write: '5',
        audio_input: '6',
        fees: '2000',
      },
      context_tier_above_input_tokens: 8,
      service_tier: 'priority',
      fee_lines: [{ feature: 'web_search', calls: 2, microusd: '2000' }],
    });
    const [header, line] = (
      await body((await new ExportLedger(new FakeLedger([row(1, detailed)])).execute({ ...cmd, format: 'csv' })).chunks)
    ).split('\r\n');
    expect(header).toMatch(
      /,settled_at,cache_write_input_tokens,audio_input_tokens,audio_output_tokens,image_output_tokens,cost_cache_write_microusd,cost_audio_input_microusd,cost_audio_output_microusd,cost_image_output_microusd,cost_fees_microusd,context_tier_above_input_tokens,service_tier,fee_lines,attempt_no,winner,attempts_total,policy_revision_id,deadline_outcome$/,
    );
    expect(line).toMatch(/,4,2,0,0,5,6,0,0,2000,8,priority,"\[\{""feature"":""web_search"",""calls"":2,""microusd"":""2000""\}\]",,,,,$/);
  });

  it('a usage row settled before the billable detail (its columns null) reads as it always did', async () => {
    const legacy: LedgerRow = {
      ...row(3),
      ...{ cacheWriteInputTokens: null, audioInputTokens: null, audioOutputTokens: null, imageOutputTokens: null },
      ...{ cacheWriteMicrousd: null, audioInputMicrousd: null, audioOutputMicrousd: null, imageOutputMicrousd: null },
      ...{ feesMicrousd: null, feeLines: null, contextTierAboveInputTokens: null, serviceTier: null },
    };
    const entry = JSON.parse(await body((await new ExportLedger(new FakeLedger([legacy])).execute(cmd)).chunks));
    expect(entry.cost_microusd_by_category).toEqual({ input: '25', cached_input: '0', output: '9007199254740993', reasoning: '0' });
    expect(entry).toMatchObject({ service_tier: null, fee_lines: null, context_tier_above_input_tokens: null });
    const line = (await body((await new ExportLedger(new FakeLedger([legacy])).execute({ ...cmd, format: 'csv' })).chunks)).split(
      '\r\n',
    )[1];
    expect(line).toMatch(/,,,,,0,0,0,0,0,,,,,,,,$/);
  });

  it('carries the attempt tree (issue 10) in both formats: attempt number, winner, attempts, policy revision, deadline outcome', async () => {
    const hedge: LedgerRow = {
      ...row(4),
      attemptRole: 'hedge',
      attemptNo: 2,
      winner: false,
      attemptsTotal: 2,
      policyRevisionId: 'rev-9',
      deadlineOutcome: 'cancelled',
    };
    const entry = JSON.parse(await body((await new ExportLedger(new FakeLedger([hedge])).execute(cmd)).chunks));
    expect(entry).toMatchObject({
      attempt_role: 'hedge',
      attempt_no: 2,
      winner: false,
      attempts_total: 2,
      policy_revision_id: 'rev-9',
      deadline_outcome: 'cancelled',
    });
    const line = (await body((await new ExportLedger(new FakeLedger([hedge])).execute({ ...cmd, format: 'csv' })).chunks)).split('\r\n')[1];
    expect(line).toMatch(/,2,false,2,rev-9,cancelled$/);
  });

  it('an empty range is a header only (CSV) or an empty body (NDJSON)', async () => {
    expect(await body((await new ExportLedger(new FakeLedger([])).execute({ ...cmd, format: 'csv' })).chunks)).toMatch(
      /^ledger_entry_id,[^\n]*\r\n$/,
    );
    expect(await body((await new ExportLedger(new FakeLedger([])).execute(cmd)).chunks)).toBe('');
  });

  it.each([
    [{ format: 'xml' }, 'format'],
    [{ from: 'yesterday' }, 'from'],
    [{ from: '2026-11-02T00:00:00Z', to: '2026-11-01T00:00:00Z' }, 'from'],
  ])('refuses %p before sending anything', async (over, param) => {
    const ledger = new FakeLedger([row(1)]);
    await expect(new ExportLedger(ledger).execute({ ...cmd, ...over })).rejects.toMatchObject({ code: 'invalid_request', param });
    expect(ledger.reads).toHaveLength(0);
  });

  it('csvRow quotes only what needs it', () => {
    expect(csvRow(['a', 1, null, 'b,c', 'd"e', '-1', '+x', '@y', ''])).toBe('a,1,,"b,c","d""e",\'-1,\'+x,\'@y,\r\n');
  });
});
