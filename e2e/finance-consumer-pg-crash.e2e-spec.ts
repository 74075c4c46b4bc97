import { PrivatePostgres, startPrivatePostgres } from '@gateway/testing';
import { Consumer, startConsumer } from './finance-consumer-process';
import { eventually, stack, uid } from './support';

/**
 * The finance consumer example on a Postgres of its own that crashes (an immediate shutdown) and
 * comes back: the process lives on and serves again. Before its pool heard 'error', the crash
 * closed the pool's idle connections under it and pg's "Unhandled 'error' event" ended the process.
 */
describe('finance consumer example, its Postgres crashed and restarted', () => {
  const run = uid();
  let server: PrivatePostgres;
  let consumer: Consumer | undefined;

  beforeAll(async () => {
    server = await startPrivatePostgres();
    consumer = await startConsumer({
      port: Number(new URL(stack.admission).port) + 27,
      group: `finance-crash-${run}`,
      schema: `finance_crash_${run.replace(/[^a-z0-9]/g, '')}`,
      env: { FINANCE_DATABASE_URL: server.url },
    });
  }, 120_000);

  afterAll(async () => {
    await consumer?.stop();
    await server?.dispose();
  });

  it('keeps running through the crash and answers from the recovered database', async () => {
    const day = new Date().toISOString().slice(0, 10);
    type Spend = { day: string; total_microusd: string; workloads: unknown[] };
    const spend = async (): Promise<Spend | undefined> => {
      const res = await fetch(`${consumer!.url}/spend?day=${day}`);
      return res.status === 200 ? ((await res.json()) as Spend) : undefined;
    };
    // the pool now holds idle connections for the crash to close (the consumer may be counting
    // what earlier suites settled on the topic meanwhile)
    const before = await spend();
    expect(before).toMatchObject({ day });
    await server.crash();
    await server.restart();
    const after = await eventually(spend, { timeoutMs: 20_000, intervalMs: 200, what: 'the finance consumer answering after the restart' });
    // what was counted before the crash was committed: nothing is lost with the restart
    expect(BigInt(after.total_microusd)).toBeGreaterThanOrEqual(BigInt(before!.total_microusd));
    expect(consumer!.logs()).not.toContain("Unhandled 'error' event");
  });
});
