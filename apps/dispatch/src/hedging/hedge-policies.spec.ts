import type { HedgePolicyRevision } from '@gateway/domain';
import { hedgeSettings } from '@gateway/testing';
import { HedgePolicies, HedgePolicySource } from './hedge-policies';

describe('HedgePolicies: the policy in force, read briefly cached per instance', () => {
  const policy: HedgePolicyRevision = {
    ...hedgeSettings(),
    revisionId: 'hp-1',
    workloadId: 'wl',
    routeId: null,
    revision: 1,
    createdBy: 'olga',
    createdAt: new Date('2026-12-02T00:00:00Z'),
    reason: 'test',
  };

  function source(answers: Array<HedgePolicyRevision | null | Error>) {
    const reads: string[] = [];
    const s: HedgePolicySource = {
      hedgePolicyFor: async (workloadId, routeId) => {
        reads.push(`${workloadId}/${routeId}`);
        const next = answers.shift() ?? null;
        if (next instanceof Error) throw next;
        return next;
      },
    };
    return { s, reads };
  }

  it('one read per (workload, route) within the TTL, concurrent callers included; a new read after it', async () => {
    const { s, reads } = source([policy, null, policy]);
    const cache = new HedgePolicies(s, 1_000);
    const [a, b] = await Promise.all([cache.forAction('wl', 'r1', 0), cache.forAction('wl', 'r1', 10)]);
    expect([a, b]).toEqual([policy, policy]);
    expect(await cache.forAction('wl', 'r2', 20)).toBeNull();
    expect(await cache.forAction('wl', 'r1', 999)).toBe(policy);
    expect(reads).toEqual(['wl/r1', 'wl/r2']);
    await cache.forAction('wl', 'r1', 1_000);
    expect(reads).toEqual(['wl/r1', 'wl/r2', 'wl/r1']);
  });

  it('a failed read is not cached: the next action asks again', async () => {
    const { s, reads } = source([new Error('connection terminated'), policy]);
    const cache = new HedgePolicies(s, 1_000);
    await expect(cache.forAction('wl', 'r1', 0)).rejects.toThrow('connection terminated');
    expect(await cache.forAction('wl', 'r1', 1)).toBe(policy);
    expect(reads).toHaveLength(2);
  });
});
