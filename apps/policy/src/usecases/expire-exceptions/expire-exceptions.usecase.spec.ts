import { FakeClock, InMemoryExceptionStore } from '../../testing/in-memory-policy.store';
import { DAY_MS, T0 } from '../../testing/fixtures';
import { EXPIRY_ACTOR, ExpireExceptions } from './expire-exceptions.usecase';

describe('ExpireExceptions', () => {
  it('records expiry of requested and active exceptions past expires_at, once', async () => {
    const store = new InMemoryExceptionStore();
    const clock = new FakeClock(T0);
    const base = {
      workloadId: 'wl',
      routeId: null,
      owner: 'o',
      maxCandidates: 2,
      perCandidateOutputCeiling: 10,
      budgetMicrousd: 1n,
      allowsStreaming: false,
      allowsDeterministicSampling: false,
      justification: 'j',
      requestedBy: 'alice',
      // the sweep does not read evidence: rows as filed before exceptions carried it
      outcome: null,
      expectedRequests: null,
      typicalInputTokens: null,
      requestProjection: null,
    };
    await store.create({ ...base, id: 'soon', expiresAt: new Date(T0.getTime() + DAY_MS) }, T0);
    await store.create({ ...base, id: 'active', expiresAt: new Date(T0.getTime() + DAY_MS) }, T0);
    await store.create({ ...base, id: 'later', expiresAt: new Date(T0.getTime() + 10 * DAY_MS) }, T0);
    await store.transition({
      id: 'active',
      from: 'requested',
      to: 'active',
      event: 'approve',
      actor: 'bob',
      reason: 'ok',
      now: T0,
      expiry: 'unexpired',
    });
    const sweep = new ExpireExceptions(store, clock, { info: () => undefined });
    expect(await sweep.execute()).toBe(0);
    clock.advance(DAY_MS);
    expect(await sweep.execute()).toBe(2);
    expect(await sweep.execute()).toBe(0);
    expect(store.rows.get('soon')!.status).toBe('expired');
    expect(store.rows.get('active')!.status).toBe('expired');
    expect(store.rows.get('later')!.status).toBe('requested');
    expect(store.events.filter((e) => e.event === 'expire')).toEqual([
      expect.objectContaining({ exceptionId: 'soon', fromStatus: 'requested', toStatus: 'expired', actor: EXPIRY_ACTOR }),
      expect.objectContaining({ exceptionId: 'active', fromStatus: 'active', toStatus: 'expired', actor: EXPIRY_ACTOR }),
    ]);
  });
});
