import { ADMISSION_GROUPS, AdmissionRepository, Database, OutboxRepository } from '@gateway/db';
import { admitInput } from '@gateway/testing';

/**
 * How admissions of one workload are grouped into `admission_admit` statements: the database is a
 * fake that admits everything and records each statement's group, so only the grouping is under
 * test (the statement's decisions are the int tests').
 */
function recordingRepository(): { repo: AdmissionRepository; groups: Array<Array<{ wf: unknown }>> } {
  const groups: Array<Array<{ wf: unknown }>> = [];
  let nextId = 1;
  const db = {
    async query(_statement: unknown, values: unknown[]) {
      const items = JSON.parse(values[0] as string) as Array<{ wf: unknown }>;
      groups.push(items);
      await new Promise((r) => setTimeout(r, 2));
      return items.map(() => ({ refused: null, outbox_id: String(nextId++), server_started: 'run-1' }));
    },
  } as unknown as Database;
  const outbox = { committedBeforeFlush: () => undefined } as unknown as OutboxRepository;
  return { repo: new AdmissionRepository(db, outbox), groups };
}

describe('admission group commit', () => {
  it('puts up to maxGroup plain admissions of a workload in one statement', async () => {
    const { repo, groups } = recordingRepository();
    const results = await Promise.all(Array.from({ length: 450 }, () => repo.admit(admitInput('w1'))));
    expect(results.every((r) => r.ok)).toBe(true);
    expect(groups.flat()).toHaveLength(450);
    expect(Math.max(...groups.map((g) => g.length))).toBe(ADMISSION_GROUPS.maxGroup);
  });

  it('caps admissions under a workflow fan-out limit (always decided one by one, each a subtransaction) at slowMaxGroup', async () => {
    const { repo, groups } = recordingRepository();
    const wf = { scopeId: 'wf-1', windowStart: new Date('2026-12-03T00:00:00Z'), limit: 10_000 };
    const results = await Promise.all([
      ...Array.from({ length: 130 }, () => repo.admit(admitInput('w1', { workflowCalls: wf }))),
      ...Array.from({ length: 300 }, () => repo.admit(admitInput('w1'))),
    ]);
    expect(results.every((r) => r.ok)).toBe(true);
    const withWorkflow = groups.filter((g) => g.some((i) => i.wf !== null));
    expect(withWorkflow.every((g) => g.every((i) => i.wf !== null))).toBe(true);
    expect(withWorkflow.flat()).toHaveLength(130);
    expect(Math.max(...withWorkflow.map((g) => g.length))).toBe(ADMISSION_GROUPS.slowMaxGroup);
    expect(ADMISSION_GROUPS.slowMaxGroup).toBeLessThanOrEqual(64);
    const plain = groups.filter((g) => g.every((i) => i.wf === null));
    expect(Math.max(...plain.map((g) => g.length))).toBeGreaterThan(ADMISSION_GROUPS.slowMaxGroup);
  });
});
