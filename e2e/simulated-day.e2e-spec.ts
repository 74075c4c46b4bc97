import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/**
 * Issue 15: a small seeded simulated day (`npm run simulate-day`, 300 actions) on a stack of its
 * own, with its faults (hedges on a heavy tail, withheld usage, cut streams, extra candidates,
 * retries, a fallback, kill -9 of dispatch). The script checks what must hold and exits non-zero
 * otherwise; this test runs it and reads its report.
 */
describe('the simulated faulty day (issue 15)', () => {
  const e2ePortBase = Number(process.env.E2E_PORT_BASE ?? 13000);
  const kafkaPort = Number(process.env.KAFKA_PORT ?? 9092);
  const reportFile = path.join(os.tmpdir(), `simday-e2e-${process.pid}.json`);

  it('reconciles to the micro-dollar: every billed attempt has one ledger row, nothing unmatched, nothing unresolved once the export is stated complete, a second import changes nothing, finance agrees', async () => {
    const out: string[] = [];
    const code = await new Promise<number | null>((resolve) => {
      const child = spawn(
        process.execPath,
        ['scripts/simulate-day.mjs', '--actions=300', '--rate=20', '--seed=15', `--report=${reportFile}`],
        {
          cwd: path.resolve(__dirname, '..'),
          env: {
            ...process.env,
            SIMDAY_PORT_BASE: process.env.SIMDAY_PORT_BASE ?? String(e2ePortBase + 800),
            SIMDAY_KAFKA_PORT: process.env.SIMDAY_KAFKA_PORT ?? String(kafkaPort + 70),
            SIMDAY_DB: process.env.SIMDAY_DB ?? `${process.env.GATEWAY_TEST_DB ?? 'gateway_test'}_day`,
          },
          stdio: ['ignore', 'pipe', 'pipe'],
        },
      );
      child.stdout.on('data', (d: Buffer) => out.push(d.toString()));
      child.stderr.on('data', (d: Buffer) => out.push(d.toString()));
      child.on('exit', resolve);
    });
    const report = fs.existsSync(reportFile)
      ? JSON.parse(fs.readFileSync(reportFile, 'utf8'))
      : { violations: ['the day wrote no report'] };
    fs.rmSync(reportFile, { force: true });
    expect({ code, violations: report.violations, output: code === 0 ? '' : out.join('').slice(-6000) }).toEqual({
      code: 0,
      violations: [],
      output: '',
    });

    // the provider billed something, and the day had its faults
    expect(report.export_lines).toBeGreaterThan(200);
    expect(report.first_import.resolved).toBeGreaterThan(0);
    // ledger total = provider export total, to the micro-dollar
    expect(report.ledger.sum).toBe(report.export_total_microusd);
    // every attempt the provider billed has exactly one ledger row; no line unmatched
    expect(report.billed_with_one_row).toBe(report.billed_attempts);
    expect(report.billed_attempts).toBe(report.export_lines);
    expect(report.first_import.unmatched).toBe(0);
    // importing twice changes nothing
    expect(report.second_import).toMatchObject({ resolved: 0, mismatch: 0, unmatched: 0, confirmed: report.export_lines });
    expect(report.second_import_changed_ledger).toBe(false);
    // the export is stated complete: nothing stays unresolved; what it had no line for was settled
    // at zero, each listed with its case's reason and what the provider did with it
    expect(report.unresolved_microusd).toBe('0');
    for (const c of report.open_cases)
      expect(c).toEqual(expect.objectContaining({ reason: expect.any(String), provider_side: expect.any(String), exposure: '0' }));
    for (const z of report.settled_at_zero)
      expect(z).toEqual(
        expect.objectContaining({ attempt_id: expect.any(String), case_reason: expect.any(String), provider_side: expect.any(String) }),
      );
    // finance (the example consumer, from the topic) and the topic itself agree with the ledger
    expect(report.finance).toEqual({ sum: report.ledger.sum, attempts: report.ledger.rows });
    expect({ sum: report.topic.sum, attempts: report.topic.attempts }).toEqual({ sum: report.ledger.sum, attempts: report.ledger.rows });
  }, 480_000);
});
