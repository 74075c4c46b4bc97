import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { parse } from 'csv-parse/sync';
import { utcDayOf } from '@gateway/domain';
import { reconciliationCall } from './policy-call';
import { eventually, openai, stack, uid, withSeeder } from './support';

const run_ = promisify(execFile);

/**
 * Issue 13's weekly audit end to end: a few requests through the official openai SDK, the
 * provider simulator's export of them imported through `POST /usage-exports` (twice: the second
 * changes nothing), then `GET /audit` for today and the workload: its row's ledger, settled-topic
 * and export figures equal the ledger's own rows, the topic as reconciliation received it, and the
 * export's lines; no difference is listed; and `npm run report -- audit` prints the same figures
 * as JSON and as CSV.
 */
describe('weekly audit (openai SDK, provider export, CLI)', () => {
  const run = uid();
  const workloadId = `w-audit-${run}`;
  const routeId = `oa-audit-${run}`;
  const today = utcDayOf(new Date());
  const REQUESTS = 4;
  let key: string;
  let financeToken: string;

  const recon = (method: string, p: string, body?: unknown) => reconciliationCall(method, p, financeToken, body);

  beforeAll(async () => {
    await withSeeder(async (seed) => {
      await seed.route({
        routeId,
        alias: routeId,
        providerKind: 'openai-chat',
        upstreamBaseUrl: stack.providerSim,
        upstreamModel: 'sim-gpt',
      });
      key = (await seed.workload({ id: workloadId, allowedAliases: [routeId], perCandidateOutputCeiling: 64 })).key;
      financeToken = await seed.operator(`fin-audit-${run}`, ['finance']);
    });
  });

  it('ties ledger, settled topic and provider export together per workload × route, and the CLI prints the same', async () => {
    const client = openai(key);
    for (let i = 0; i < REQUESTS; i++) {
      const r = await client.chat.completions.create({
        model: routeId,
        max_tokens: 16,
        messages: [{ role: 'user', content: `audit ${run} ${i}` }],
      });
      expect(r.choices).toHaveLength(1);
    }
    // the ledger as settlement wrote it, and the attempts' ids (which the sim's export lines carry)
    const ledger = await eventually(
      () =>
        withSeeder(async (_seed, db) => {
          const rows = await db.prisma.ledgerEntry.findMany({ where: { workloadId } });
          return rows.length === REQUESTS ? rows : undefined;
        }),
      { timeoutMs: 30_000, what: 'the ledger rows' },
    );
    const ledgerTotal = ledger.reduce((s, r) => s + r.costMicrousd, 0n);
    expect(ledgerTotal).toBeGreaterThan(0n);
    const attemptIds = new Set(ledger.map((r) => r.attemptId));

    // the provider's export of today, only this test's lines (other suites share the simulator)
    const exportText = await (await fetch(`${stack.providerSim}/_sim/export?day=${today}&format=jsonl`)).text();
    const mine = exportText
      .split('\n')
      .filter((l) => l.trim() !== '')
      .filter((l) => attemptIds.has((JSON.parse(l) as { client_request_id?: string }).client_request_id ?? ''));
    expect(mine).toHaveLength(REQUESTS);
    // imported twice: the second import changes nothing
    for (let round = 0; round < 2; round++) {
      const imported = await recon('POST', '/usage-exports', { format: 'jsonl', content: mine.join('\n') });
      expect(imported.status).toBe(200);
      const body = JSON.parse(imported.text) as { counts: Record<string, number>; export_cost_microusd: string };
      expect(body.counts).toMatchObject({ confirmed: REQUESTS, mismatch: 0, unmatched: 0 });
      expect(body.export_cost_microusd).toBe(ledgerTotal.toString());
    }

    const auditPath = `/audit?from=${today}&to=${today}&workload_id=${workloadId}`;
    const report = await eventually(
      async () => {
        const r = JSON.parse((await recon('GET', auditPath)).text) as Record<string, any>;
        // both topic sides are read by reconciliation's report consumers every few seconds
        return r.rows?.[0]?.topic.events === REQUESTS && r.rows[0].counts.admitted === REQUESTS ? r : undefined;
      },
      { timeoutMs: 30_000, what: "the workload's settled events and admission decisions in the audit" },
    );
    expect(report.rows).toEqual([
      expect.objectContaining({
        workload_id: workloadId,
        route_id: routeId,
        reservations: expect.objectContaining({
          made: REQUESTS,
          settled: REQUESTS,
          unresolved: 0,
          settled_microusd: ledgerTotal.toString(),
        }),
        ledger: { entries: REQUESTS, cost_microusd: ledgerTotal.toString() },
        topic: { events: REQUESTS, cost_microusd: ledgerTotal.toString() },
        export: { lines: REQUESTS, cost_microusd: ledgerTotal.toString() },
        counts: expect.objectContaining({
          admitted: REQUESTS,
          refused: 0,
          effective_total: REQUESTS,
          returned_total: REQUESTS,
          requested: { omitted: REQUESTS },
        }),
        output_per_request: expect.objectContaining({ requests: REQUESTS }),
        differences: 0,
      }),
    ]);
    expect(report.differences).toEqual([]);
    // each export line is kept once, however often it was imported
    await withSeeder(async (_seed, db) => {
      expect(await db.prisma.usageExportLine.count({ where: { attemptId: { in: [...attemptIds] } } })).toBe(REQUESTS);
    });

    // the CLI: the same figures as JSON and as CSV
    const cli = (format: string) =>
      run_(
        process.execPath,
        [path.join(__dirname, '..', 'scripts', 'report.mjs'), 'audit', '--from', today, '--to', today, '--workload', workloadId, format],
        {
          env: { ...process.env, GATEWAY_OPERATOR_TOKEN: financeToken, RECONCILIATION_URL: process.env.E2E_RECONCILIATION_URL },
        },
      );
    const json = JSON.parse((await cli('--json')).stdout) as Record<string, any>;
    expect(json.rows).toEqual(report.rows);
    expect(json.differences).toEqual([]);
    const csv = (await cli('--csv')).stdout;
    const [rowsPart] = csv.split('\r\n\r\n');
    const rows = parse(rowsPart, { columns: true }) as Array<Record<string, string>>;
    expect(rows).toEqual([
      expect.objectContaining({
        workload_id: workloadId,
        route_id: routeId,
        ledger_entries: String(REQUESTS),
        ledger_microusd: ledgerTotal.toString(),
        topic_microusd: ledgerTotal.toString(),
        export_microusd: ledgerTotal.toString(),
        admitted: String(REQUESTS),
        returned_total: String(REQUESTS),
        differences: '0',
      }),
    ]);
  });
});
