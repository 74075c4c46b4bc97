import { FakeClock, InMemoryPolicyStore, SequentialIds } from '../../testing/in-memory-policy.store';
import { ALLOWLIST, bob, olga, routeCommand, T0 } from '../../testing/fixtures';
import { CreateRoute } from '../create-route/create-route.usecase';
import { PendingChange } from '../change-requests';
import { fourEyes } from '../../testing/four-eyes';
import { updateRouteContractBody } from './update-route-contract.command';

describe('UpdateRouteContract', () => {
  const setup = async () => {
    const store = new InMemoryPolicyStore();
    const clock = new FakeClock(T0);
    await new CreateRoute(store, clock, new SequentialIds('rt'), ALLOWLIST).execute(olga, routeCommand());
    await store.verifyCurrentVersion('rt-openai', 1, 'olga', {}, T0);
    const { id: _id, ...contract } = routeCommand();
    const eyes = fourEyes(store, clock);
    return { store, contract, eyes, update: eyes.updateContract };
  };

  it.each([
    ['gateway version', { gateway_version: '0.2.0' }],
    ['client library version', { client_library_version: 'openai@7.0.0' }],
    ['cap semantics', { output_cap_semantics: null }],
    ['verification TTL', { verification_ttl_seconds: 7200 }],
    // names where the upstream deduplicates a retry: changes no spend, so no four-eyes
    ['upstream idempotency header', { upstream_idempotency_header: 'Idempotency-Key' }],
  ])('a change of %s appends a new unverified version; the old one keeps its verification', async (_what, change) => {
    const { store, contract, update } = await setup();
    const route = await update.execute(olga, 'rt-openai', { ...contract, ...change });
    if (route instanceof PendingChange) throw new Error('expected a direct change');
    expect(route).toMatchObject({ changed: true, current_version: 2, verification_state: 'unverified' });
    expect(route.versions.map((v) => [v.version, v.current, v.verification_state])).toEqual([
      [2, true, 'unverified'],
      [1, false, 'verified'],
    ]);
    expect(store.changes.at(-1)).toMatchObject({ entity: 'route', change: 'contract version 2' });
  });

  it.each([
    ['upstream model', { upstream_model: 'gpt-4.1-mini' }, 'upstream_model changed'],
    ['provider kind', { provider_kind: 'openai-compatible' as const }, 'provider_kind changed'],
    ['upstream URL', { upstream_base_url: 'http://127.0.0.1:9999' }, 'upstream_base_url changed'],
    ['priced features', { priced_features: ['service_tier'] }, 'priced feature service_tier admitted'],
    ['upstream credential', { credential_ref: 'OPENAI_BILLING' }, 'credential_ref changed'],
  ])('a change of %s waits for a second operator; approved, it appends an unverified version', async (_what, change, raise) => {
    const { store, contract, update, eyes } = await setup();
    const pending = await update.execute(olga, 'rt-openai', { ...contract, ...change });
    if (!(pending instanceof PendingChange)) throw new Error('expected a change request');
    expect(pending.body).toMatchObject({ kind: 'route_contract', target_id: 'rt-openai', raises: [raise] });
    expect(store.routes.get('rt-openai')!.currentVersion).toBe(1);
    await eyes.decide.execute(bob, pending.body.id, { decision: 'approve' });
    expect(store.routes.get('rt-openai')!.currentVersion).toBe(2);
    expect(store.routes.get('rt-openai')!.versions[0]).toMatchObject({ verifiedAt: null, createdBy: 'olga' });
  });

  it('priced features and media minimums are contract facts: approved, the new version carries and shows them', async () => {
    const { store, contract, update, eyes } = await setup();
    const pending = await update.execute(olga, 'rt-openai', { ...contract, priced_features: ['prediction'], image_input_tokens: 2000 });
    if (!(pending instanceof PendingChange)) throw new Error('expected a change request');
    await eyes.decide.execute(bob, pending.body.id, { decision: 'approve' });
    expect(store.routes.get('rt-openai')!.versions[0]).toMatchObject({ pricedFeatures: ['prediction'], imageInputTokens: 2000 });
    const again = await update.execute(olga, 'rt-openai', { ...contract, priced_features: ['prediction'], image_input_tokens: 2000 });
    expect(again).toMatchObject({ changed: false });
    if (again instanceof PendingChange) throw new Error('expected no change');
    expect(again.versions[0]).toMatchObject({ priced_features: ['prediction'], media_input_tokens: { image: 2000 } });
  });

  it('credential_ref: left out of a PUT it is kept, null removes it (four-eyes), and the view shows only the name', async () => {
    const { store, contract, update, eyes } = await setup();
    const pending = await update.execute(olga, 'rt-openai', { ...contract, credential_ref: 'OPENAI' });
    if (!(pending instanceof PendingChange)) throw new Error('expected a change request');
    await eyes.decide.execute(bob, pending.body.id, { decision: 'approve' });
    expect(store.routes.get('rt-openai')!.versions[0]).toMatchObject({ version: 2, credentialRef: 'OPENAI', verifiedAt: null });
    const kept = await update.execute(olga, 'rt-openai', contract);
    if (kept instanceof PendingChange) throw new Error('expected no change');
    expect(kept).toMatchObject({ changed: false, current_version: 2 });
    expect(kept.versions[0]).toMatchObject({ credential_ref: 'OPENAI' });
    const removal = await update.execute(olga, 'rt-openai', { ...contract, credential_ref: null });
    if (!(removal instanceof PendingChange)) throw new Error('expected a change request');
    expect(removal.body).toMatchObject({ raises: ['credential_ref changed'] });
  });

  it('credential_ref is a name, never a key: the body schema refuses anything but A-Z, 0-9 and _', () => {
    const { id: _id, ...contract } = routeCommand();
    for (const bad of ['sk-live-123', 'openai', '', 'A'.repeat(65), 'OPEN AI']) {
      expect(updateRouteContractBody.safeParse({ ...contract, credential_ref: bad }).success).toBe(false);
    }
    for (const good of ['OPENAI', 'GEMINI_PROD_2', null]) {
      expect(updateRouteContractBody.safeParse({ ...contract, credential_ref: good }).success).toBe(true);
    }
  });

  it('upstream_idempotency_header: an HTTP header name, shown, kept when left out of a PUT, removed by null', async () => {
    const { id: _id, ...body } = routeCommand();
    for (const bad of ['', 'Idempotency Key', 'X-Key:', 'a'.repeat(65), 'Ключ', 'x\r\ny']) {
      expect(updateRouteContractBody.safeParse({ ...body, upstream_idempotency_header: bad }).success).toBe(false);
    }
    const { contract, update } = await setup();
    const set = await update.execute(olga, 'rt-openai', { ...contract, upstream_idempotency_header: 'Idempotency-Key' });
    if (set instanceof PendingChange) throw new Error('expected a direct change');
    expect(set.versions[0]).toMatchObject({ version: 2, upstream_idempotency_header: 'Idempotency-Key' });
    const kept = await update.execute(olga, 'rt-openai', contract);
    if (kept instanceof PendingChange) throw new Error('expected no change');
    expect(kept).toMatchObject({ changed: false, current_version: 2 });
    const removed = await update.execute(olga, 'rt-openai', { ...contract, upstream_idempotency_header: null });
    if (removed instanceof PendingChange) throw new Error('expected a direct change');
    expect(removed.versions[0]).toMatchObject({ version: 3, upstream_idempotency_header: null });
  });

  it('re-sending the current contract changes nothing', async () => {
    const { store, contract, update } = await setup();
    const before = store.changes.length;
    const route = await update.execute(olga, 'rt-openai', contract);
    expect(route).toMatchObject({ changed: false, current_version: 1, verification_state: 'verified' });
    expect(store.changes).toHaveLength(before);
  });

  it('renames the alias unless another route has it', async () => {
    const { store, contract, update } = await setup();
    await store.createRoute({ ...toInput('rt-gemini', 'approved-gemini') }, T0);
    await expect(update.execute(olga, 'rt-openai', { ...contract, alias: 'approved-gemini' })).rejects.toMatchObject({
      code: 'alias_taken',
    });
    const renamed = await update.execute(olga, 'rt-openai', { ...contract, alias: 'approved-cheap' });
    expect(renamed).toMatchObject({ alias: 'approved-cheap', current_version: 2 });
  });

  it('is 404 for an unknown route (and does not create it)', async () => {
    const { store, contract, update } = await setup();
    await expect(update.execute(olga, 'nope', contract)).rejects.toMatchObject({ code: 'not_found' });
    expect(store.routes.has('nope')).toBe(false);
  });
});

function toInput(routeId: string, alias: string) {
  return {
    routeId,
    alias,
    providerKind: 'gemini-generate',
    upstreamBaseUrl: 'http://g.test',
    upstreamModel: 'gemini-2.5-flash',
    candidateParam: 'candidateCount',
    maxCandidates: 4,
    outputCapParam: 'maxOutputTokens',
    outputCapSemantics: 'per_candidate',
    usageShape: 'gemini.usageMetadata',
    streamingUsage: 'final_chunk_usageMetadata',
    gatewayVersion: '0.1.0',
    clientLibraryVersion: '@google/genai@2.32.0',
    verificationTtlSeconds: 3600,
    actor: 'olga',
    reason: 'test',
  };
}
