import { Consumer, startConsumer } from './finance-consumer-process';
import { eventually, gemini, openai, seedSimRoutes, stack, uid, withSeeder } from './support';

/**
 * Issue 9 item 6: the finance consumer example (examples/finance-consumer, a plain NestJS app on
 * Nest's standard Kafka transport) run as finance would run it, against this stack's broker and
 * database. Its per-workload, per-day totals and counts must equal what GET /ledger says, and a
 * replay of the whole topic under a new consumer group must not change them.
 */
describe('finance consumer example', () => {
  const run = uid();
  const chat = `fin-oa-${run}`;
  const gm = `fin-gm-${run}`;
  const workloads = [`fin-a-${run}`, `fin-b-${run}`];
  const schema = `finance_e2e_${run.replace(/[^a-z0-9]/g, '')}`;
  const settlement = process.env.E2E_SETTLEMENT_URL!;
  const basePort = Number(new URL(stack.admission).port) + 20;
  const keys: Record<string, string> = {};
  let finance: string;
  let consumer: Consumer | undefined;

  beforeAll(async () => {
    await withSeeder(async (seed) => {
      await seedSimRoutes(seed, { chat, gemini: gm });
      for (const id of workloads) keys[id] = (await seed.workload({ id, allowedAliases: [chat, gm] })).key;
      finance = await seed.operator(`fin-${run}`, ['finance']);
    });
  });

  afterAll(async () => {
    await consumer?.stop();
  });

  /** Requests through the official SDKs: streamed and whole chat, and Gemini generateContent. */
  const spend = async (workloadId: string, chats: number) => {
    const key = keys[workloadId];
    for (let i = 0; i < chats; i += 1) {
      await openai(key).chat.completions.create({ model: chat, messages: [{ role: 'user', content: `spend ${i} ${uid()}` }] });
    }
    const stream = await openai(key).chat.completions.create({
      model: chat,
      messages: [{ role: 'user', content: `spend streamed ${uid()}` }],
      stream: true,
    });
    for await (const _chunk of stream) {
      // drained: the usage arrives with the last chunk
    }
    await gemini(key).models.generateContent({ model: gm, contents: `spend gemini ${uid()}` });
    return chats + 2;
  };

  /** Every ledger row of a workload (GET /ledger, keyset-paged), once there are `expected` of them. */
  const ledgerOf = (workloadId: string, expected: number) =>
    eventually(
      async () => {
        const rows: Array<{ attempt_id: string; cost_microusd: string; settled_at: string }> = [];
        let cursor: string | null = null;
        do {
          const qs = new URLSearchParams({ workload_id: workloadId, limit: '1000', ...(cursor ? { cursor } : {}) });
          const res = await fetch(`${settlement}/ledger?${qs}`, { headers: { authorization: `Bearer ${finance}` } });
          if (res.status !== 200) throw new Error(`GET /ledger → ${res.status}`);
          const page = (await res.json()) as { entries: typeof rows; next_cursor: string | null };
          rows.push(...page.entries);
          cursor = page.next_cursor;
        } while (cursor);
        return rows.length === expected ? rows : undefined;
      },
      { timeoutMs: 30000, what: `${expected} ledger rows of ${workloadId}` },
    );

  /** Ledger totals per `workload|day` (UTC day of settled_at): micro-USD and rows. */
  const ledgerTotals = async (expected: Record<string, number>) => {
    const totals = new Map<string, { cost_microusd: string; attempts: number }>();
    const attemptIds: string[] = [];
    for (const workloadId of workloads) {
      for (const row of await ledgerOf(workloadId, expected[workloadId])) {
        const k = `${workloadId}|${row.settled_at.slice(0, 10)}`;
        const t = totals.get(k) ?? { cost_microusd: '0', attempts: 0 };
        totals.set(k, { cost_microusd: (BigInt(t.cost_microusd) + BigInt(row.cost_microusd)).toString(), attempts: t.attempts + 1 });
        attemptIds.push(row.attempt_id);
      }
    }
    return { totals, attemptIds };
  };

  /** The example's GET /spend for the same workloads and days. */
  const consumerTotals = async (c: Consumer, days: string[]) => {
    const totals = new Map<string, { cost_microusd: string; attempts: number }>();
    for (const day of days) {
      const res = await fetch(`${c.url}/spend?day=${day}`);
      const body = (await res.json()) as { workloads: Array<{ workload_id: string; cost_microusd: string; attempts: number }> };
      for (const w of body.workloads.filter((x) => workloads.includes(x.workload_id))) {
        totals.set(`${w.workload_id}|${day}`, { cost_microusd: w.cost_microusd, attempts: w.attempts });
      }
    }
    return totals;
  };

  const sameTotals = (c: Consumer, want: Map<string, { cost_microusd: string; attempts: number }>) => {
    const days = [...new Set([...want.keys()].map((k) => k.split('|')[1]))];
    return eventually(
      async () => {
        const got = await consumerTotals(c, days);
        return JSON.stringify([...got].sort()) === JSON.stringify([...want].sort()) ? got : undefined;
      },
      { timeoutMs: 30000, what: 'the consumer totals to equal the ledger' },
    );
  };

  it('per workload and day, its micro-USD totals and counts equal GET /ledger', async () => {
    const expected = { [workloads[0]]: await spend(workloads[0], 2), [workloads[1]]: await spend(workloads[1], 1) };
    const { totals } = await ledgerTotals(expected);
    expect([...totals.values()].every((t) => BigInt(t.cost_microusd) > 0n)).toBe(true);

    consumer = await startConsumer({ port: basePort, group: `finance-e2e-${run}-1`, schema });
    const got = await sameTotals(consumer, totals);
    expect(got).toEqual(totals);
    expect((await fetch(`${consumer.url}/spend?day=2026-02-30`)).status).toBe(400);
    expect((await fetch(`${consumer.url}/spend`)).status).toBe(400);
  });

  it('a replay of the whole topic under a new consumer group changes no total', async () => {
    await consumer?.stop();
    const before = await ledgerTotals({ [workloads[0]]: 4, [workloads[1]]: 3 });
    consumer = await startConsumer({ port: basePort + 1, group: `finance-e2e-${run}-2`, schema });
    // One more request per workload: once the new group has counted it, it has read (and
    // recognised) everything before it on that workload's partition.
    await spend(workloads[0], 0);
    await spend(workloads[1], 0);
    const after = await ledgerTotals({ [workloads[0]]: 6, [workloads[1]]: 5 });
    await sameTotals(consumer, after.totals);
    const c = consumer;
    for (const attemptId of before.attemptIds) expect(c.logs()).toContain(`already counted attempt:${attemptId} (redelivery ignored)`);
    const fresh = after.attemptIds.filter((id) => !before.attemptIds.includes(id));
    expect(fresh).toHaveLength(4);
    for (const attemptId of fresh) expect(c.logs()).toContain(`counted attempt:${attemptId} workload=`);
    // every message on the topic, from every suite so far, matched the published schema
    expect(c.logs()).not.toContain('does not match the usage.settled.v1 schema');
  });
});
