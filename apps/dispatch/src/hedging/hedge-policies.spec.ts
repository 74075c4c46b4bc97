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

  describe('forCommand: the experiment cohort decides the policy (issue 11)', () => {
    const experimentRevision: HedgePolicyRevision = { ...policy, revisionId: 'hp-exp', revision: 1 };
    const inForce: HedgePolicyRevision = { ...policy, revisionId: 'hp-2', revision: 2 };
    function both() {
      const reads: string[] = [];
      const s: HedgePolicySource = {
        hedgePolicyFor: async (w, r) => {
          reads.push(`for:${w}/${r}`);
          return inForce;
        },
        revisionById: async (id) => {
          reads.push(`id:${id}`);
          return id === 'hp-exp' ? experimentRevision : null;
        },
      };
      return { cache: new HedgePolicies(s, 1_000), reads };
    }
    const cmd = (cohort?: 'hedged' | 'holdout' | 'ineligible') => ({
      workload_id: 'wl',
      route: { route_id: 'r1' },
      ...(cohort ? { experiment: { id: 'exp-1', cohort, policy_revision_id: 'hp-exp' } } : {}),
    });

    it('holdout runs primary-only: no policy, nothing read', async () => {
      const { cache, reads } = both();
      expect(await cache.forCommand(cmd('holdout'), 0)).toBeNull();
      expect(reads).toEqual([]);
    });

    it('hedged runs under the experiment revision even when a later revision is in force', async () => {
      const { cache, reads } = both();
      expect(await cache.forCommand(cmd('hedged'), 0)).toBe(experimentRevision);
      expect(reads).toEqual(['id:hp-exp']);
    });

    it('ineligible and outside an experiment: the policy in force', async () => {
      const { cache } = both();
      expect(await cache.forCommand(cmd('ineligible'), 0)).toBe(inForce);
      expect(await cache.forCommand(cmd(), 0)).toBe(inForce);
    });
  });

  describe('runsUnder: an open experiment pause (issue 11)', () => {
    const experimentRevision: HedgePolicyRevision = { ...policy, revisionId: 'hp-exp', revision: 1 };
    function paused(states: Array<string | null>) {
      const reads: string[] = [];
      const s: HedgePolicySource = { hedgePolicyFor: async () => policy, revisionById: async () => experimentRevision };
      const pauses = {
        openPauseId: async (id: string) => {
          reads.push(id);
          return states.shift() ?? null;
        },
      };
      return { cache: new HedgePolicies(s, 5_000, pauses, 1_000), reads };
    }
    const cmd = (cohort: 'hedged' | 'holdout' | 'ineligible') => ({
      workload_id: 'wl',
      route: { route_id: 'r1' },
      experiment: { id: 'exp-1', cohort, policy_revision_id: 'hp-exp' },
    });

    it('paused: the hedged cohort runs primary-only; both cohorts record the pause; ineligible reads nothing', async () => {
      const { cache, reads } = paused(['pause-1']);
      expect(await cache.runsUnder(cmd('hedged'), 0)).toEqual({ policy: null, pauseId: 'pause-1' });
      expect(await cache.runsUnder(cmd('holdout'), 10)).toEqual({ policy: null, pauseId: 'pause-1' });
      expect(await cache.runsUnder(cmd('ineligible'), 20)).toEqual({ policy, pauseId: null });
      expect(await cache.runsUnder({ workload_id: 'wl', route: { route_id: 'r1' } }, 30)).toEqual({ policy, pauseId: null });
      expect(reads).toEqual(['exp-1']);
    });

    it('not paused: the experiment revision; the state is read again after its TTL, or set by notePause', async () => {
      const { cache, reads } = paused([null, 'pause-2']);
      expect(await cache.runsUnder(cmd('hedged'), 0)).toEqual({ policy: experimentRevision, pauseId: null });
      expect(await cache.runsUnder(cmd('hedged'), 999)).toEqual({ policy: experimentRevision, pauseId: null });
      expect(await cache.runsUnder(cmd('hedged'), 1_000)).toEqual({ policy: null, pauseId: 'pause-2' });
      expect(reads).toHaveLength(2);
      cache.notePause('exp-1', null, 1_100);
      expect(await cache.runsUnder(cmd('hedged'), 1_200)).toEqual({ policy: experimentRevision, pauseId: null });
      expect(reads).toHaveLength(2);
    });

    it('without a pause source nothing is ever paused', async () => {
      const cache = new HedgePolicies({ hedgePolicyFor: async () => policy, revisionById: async () => experimentRevision });
      expect(await cache.runsUnder(cmd('hedged'), 0)).toEqual({ policy: experimentRevision, pauseId: null });
    });
  });
});
