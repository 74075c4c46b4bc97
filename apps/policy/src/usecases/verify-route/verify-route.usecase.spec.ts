import type { ProbeObservation, ProbeTarget } from '../../probe/route-probe';
import { FakeClock, InMemoryPolicyStore, SequentialIds } from '../../testing/in-memory-policy.store';
import { olga, routeCommand, T0, ALLOWLIST } from '../../testing/fixtures';
import { CreateRoute } from '../create-route/create-route.usecase';
import { GetRoute } from '../get-route/get-route.usecase';
import { VerifyRoute } from './verify-route.usecase';

const answered: ProbeObservation = {
  action_id: 'act-probe-1',
  attempt_id: 'att-probe-1',
  reserved_microusd: '120',
  requested_candidates: 2,
  output_cap: 16,
  http_status: 200,
  provider_error: null,
  returned_candidates: 2,
  usage_present: true,
  input_tokens: 14,
  output_tokens_total: 8,
  reasoning_tokens: 0,
  provider_request_id: 'req_1',
  prompt_block_reason: null,
  duration_ms: 3,
};

class FakeProbe {
  targets: ProbeTarget[] = [];
  constructor(private readonly result: ProbeObservation) {}
  async run(t: ProbeTarget): Promise<ProbeObservation> {
    this.targets.push(t);
    return this.result;
  }
}

describe('VerifyRoute', () => {
  const setup = async (probeResult = answered, maxCandidates = 4) => {
    const store = new InMemoryPolicyStore();
    const clock = new FakeClock(T0);
    await new CreateRoute(store, clock, new SequentialIds('rt'), ALLOWLIST).execute(olga, routeCommand({ max_candidates: maxCandidates }));
    const probe = new FakeProbe(probeResult);
    return { store, clock, probe, verify: new VerifyRoute(store, probe, clock) };
  };

  it('records verified_at / verified_by on the current version; the TTL then makes it stale', async () => {
    const { clock, verify, store } = await setup();
    const route = await verify.execute(olga, 'rt-openai', { probe: false, notes: 'read the provider docs' });
    expect(route).toMatchObject({
      verification_state: 'verified',
      contract: {
        verified_by: 'olga',
        verified_at: T0.toISOString(),
        verification_notes: { method: 'operator_review', notes: 'read the provider docs' },
      },
    });
    expect(store.changes.at(-1)).toMatchObject({ change: 'contract version 1 verified', actor: 'olga' });
    clock.advance(3601 * 1000);
    expect(await new GetRoute(store, clock).execute('rt-openai')).toMatchObject({
      verification_state: 'stale',
      contract: { verification_state: 'stale' },
    });
    const reverified = await verify.execute(olga, 'rt-openai', { probe: false });
    expect(reverified.verification_state).toBe('verified');
  });

  it('with probe=true sends 2 candidates upstream and keeps what came back as evidence', async () => {
    const { verify, probe } = await setup();
    const route = await verify.execute(olga, 'rt-openai', { probe: true });
    expect(probe.targets).toHaveLength(1);
    expect(probe.targets[0]).toMatchObject({ routeId: 'rt-openai', alias: 'approved-standard', contract: { version: 1 } });
    expect(route.contract.verification_notes).toMatchObject({
      method: 'automated_probe',
      probe: { returned_candidates: 2, usage_present: true, http_status: 200, passed: true, by: 'olga' },
    });
  });

  it('refuses verification when the probe gets fewer candidates, keeping the failed evidence', async () => {
    const { verify, store } = await setup({ ...answered, returned_candidates: 1 });
    await expect(verify.execute(olga, 'rt-openai', { probe: true })).rejects.toMatchObject({ code: 'probe_failed' });
    const v = store.routes.get('rt-openai')!.versions[0];
    expect(v.verifiedAt).toBeNull();
    expect(v.verificationNotes).toMatchObject({ last_failed_probe: { returned_candidates: 1, passed: false } });
  });

  it('refuses verification when the probe response has no usage', async () => {
    const { verify } = await setup({ ...answered, usage_present: false, output_tokens_total: null });
    await expect(verify.execute(olga, 'rt-openai', { probe: true })).rejects.toMatchObject({
      code: 'probe_failed',
      message: expect.stringMatching(/no aggregate usage/),
    });
  });

  it('a failed probe does not undo an earlier verification', async () => {
    const { verify, store } = await setup({ ...answered, returned_candidates: 1 });
    await verify.execute(olga, 'rt-openai', { probe: false });
    await expect(verify.execute(olga, 'rt-openai', { probe: true })).rejects.toMatchObject({ code: 'probe_failed' });
    const v = store.routes.get('rt-openai')!.versions[0];
    expect(v.verifiedBy).toBe('olga');
    expect(v.verificationNotes).toMatchObject({ method: 'operator_review', last_failed_probe: { passed: false } });
  });

  it('refuses a probe on a single-candidate contract (400) and a stale version pin (409)', async () => {
    const single = await setup(answered, 1);
    await expect(single.verify.execute(olga, 'rt-openai', { probe: true })).rejects.toMatchObject({
      code: 'invalid_request',
      param: 'probe',
    });
    const { verify } = await setup();
    await expect(verify.execute(olga, 'rt-openai', { probe: false, version: 2 })).rejects.toMatchObject({ code: 'version_not_current' });
    await expect(verify.execute(olga, 'nope', { probe: false })).rejects.toMatchObject({ code: 'not_found' });
  });
});
