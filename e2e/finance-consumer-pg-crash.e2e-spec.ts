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
    const day = '2026-12-06';
    const before = await fetch(`${consumer!.url}/spend?day=${day}`);
    expect(before.status).toBe(200); // the pool now holds idle connections for the crash to close
    await server.crash();
    await server.restart();
    const after = await eventually(
      async () => {
        const res = await fetch(`${consumer!.url}/spend?day=${day}`);
        return res.status === 200 ? res.json() : undefined;
      },
      { timeoutMs: 20_000, intervalMs: 200, what: 'the finance consumer answering after the restart' },
    );
    expect(after).toEqual({ day, total_microusd: '0', workloads: [] });
    expect(consumer!.logs()).not.toContain("Unhandled 'error' event");
  });
});
