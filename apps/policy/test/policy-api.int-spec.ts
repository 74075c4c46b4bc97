// The policy service in-process against the real Postgres and Kafka, driven over HTTP with fetch.
// Every id carries this run's suffix. Verification probes travel through dispatch, so they are
// tested end to end (e2e/route-probe.e2e-spec.ts).
import { randomBytes, randomUUID } from 'node:crypto';
import type { PolicyChangedV1 } from '@gateway/contracts';
import { CatalogRepository, Database, HedgePolicyRepository, OutboxRepository, PolicyRepository } from '@gateway/db';
import { hashCredential } from '@gateway/domain';
import { KafkaBus } from '@gateway/messaging';
import { eventually, experimentBody, hedgePolicyBody, openAiContractBody, structuredPriceBody } from '@gateway/testing';
import type { RunningService } from '@gateway/service-kit';
import { startPolicy } from '../src/app';

const DATABASE_URL = process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/gateway_test';
const KAFKA_BROKERS = process.env.KAFKA_BROKERS ?? '127.0.0.1:9092';
const run = randomBytes(4).toString('hex');
const DAY_MS = 24 * 60 * 60 * 1000;
/** What every exception request carries besides its limits (issue 16). */
const evidence = { outcome: { metric: 'm', baseline: 1, target: 2 }, expected_requests: 10, typical_input_tokens: 100 };

let policy: RunningService;
let db: Database;
let catalog: CatalogRepository;
const changes: PolicyChangedV1[] = [];
const tokens = { operator: '', requester: '', approver: '', finance: '' };

beforeAll(async () => {
  policy = await startPolicy({
    DATABASE_URL,
    KAFKA_BROKERS,
    POLICY_PORT: '0',
    HOST: '127.0.0.1',
    LOG_LEVEL: 'silent',
    POLICY_PROBE_TIMEOUT_MS: '5000',
    GATEWAY_CONTENT_KEY: process.env.GATEWAY_CONTENT_KEY,
    GATEWAY_UPSTREAM_ALLOWLIST: '127.0.0.1',
  });
  db = new Database(DATABASE_URL, { poolMax: 2 });
  catalog = new CatalogRepository(db);
  const repo = new PolicyRepository(db, new OutboxRepository(db));
  const seed = async (subject: string, roles: string[]) => {
    const token = `op_${randomBytes(18).toString('base64url')}`;
    await repo.addOperatorToken({ id: randomUUID(), subject, roles, tokenHash: hashCredential(token) }, new Date());
    return token;
  };
  tokens.operator = await seed(`olga-${run}`, ['operator']);
  tokens.requester = await seed(`alice-${run}`, ['operator', 'approver']);
  tokens.approver = await seed(`bob-${run}`, ['approver']);
  tokens.finance = await seed(`fin-${run}`, ['finance']);
  await policy.app.get(KafkaBus).subscribe('policyChanged', { groupId: `policy-int-${run}`, fromBeginning: false }, async (e) => {
    changes.push(e);
  });
});

afterAll(async () => {
  await policy?.close();
  await db?.close();
});

describe('operator tokens', () => {
  it('an expired token is refused (401); an unexpired one works', async () => {
    const repo = new PolicyRepository(db, new OutboxRepository(db));
    const expired = `op_${randomBytes(18).toString('base64url')}`;
    const fresh = `op_${randomBytes(18).toString('base64url')}`;
    const add = (token: string, expiresAt: Date) =>
      repo.addOperatorToken(
        { id: randomUUID(), subject: `tmp-${run}`, roles: ['operator'], tokenHash: hashCredential(token), expiresAt },
        new Date(),
      );
    await add(expired, new Date(Date.now() - 1000));
    await add(fresh, new Date(Date.now() + DAY_MS));
    expect((await call('GET', '/routes', expired)).status).toBe(401);
    expect((await call('GET', '/routes', fresh)).status).toBe(200);
  });
});

describe('routes, contracts and prices', () => {
  it('creates a route, verifies it after review, and versions every contract change', async () => {
    const routeId = `rt-${run}`;
    const created = await call(
      'POST',
      '/routes',
      tokens.operator,
      contract({ id: routeId, alias: `standard-${run}`, priced_features: ['prediction'], image_input_tokens: 2000 }),
    );
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({
      id: routeId,
      current_version: 1,
      verification_state: 'unverified',
      contract: { verified_at: null, priced_features: ['prediction'], media_input_tokens: { image: 2000, audio: 1000 } },
    });

    const verified = await call('POST', `/routes/${routeId}/verify`, tokens.operator, {
      notes: 'reviewed against the provider docs',
      version: 1,
    });
    expect(verified.status).toBe(200);
    expect(verified.body).toMatchObject({
      verification_state: 'verified',
      contract: {
        verified_by: `olga-${run}`,
        verification_notes: { method: 'operator_review', notes: 'reviewed against the provider docs' },
      },
    });
    const changed = await call(
      'PUT',
      `/routes/${routeId}/contract`,
      tokens.operator,
      contract({ alias: `standard-${run}`, upstream_model: 'gpt-test-2', reason: 'model bump' }),
    );
    // A new model is a spend decision: it waits for a second operator, then lands unverified.
    expect(changed.status).toBe(202);
    expect(changed.body).toMatchObject({ kind: 'route_contract', status: 'pending', raises: ['upstream_model changed'] });
    expect((await call('GET', `/routes/${routeId}`, tokens.operator)).body.current_version).toBe(1);
    const approvedChange = await call('POST', `/change-requests/${changed.body.id}/approve`, tokens.approver, {});
    expect(approvedChange.status).toBe(200);
    expect(approvedChange.body).toMatchObject({ status: 'approved', decided_by: `bob-${run}` });

    const read = await call('GET', `/routes/${routeId}`, tokens.operator);
    expect(
      read.body.versions.map((v: { version: number; verification_state: string; current: boolean }) => [
        v.version,
        v.verification_state,
        v.current,
      ]),
    ).toEqual([
      [2, 'unverified', true],
      [1, 'verified', false],
    ]);
    const listed = await call('GET', '/routes', tokens.operator);
    expect(listed.body.routes).toEqual(
      expect.arrayContaining([expect.objectContaining({ id: routeId, current_version: 2, verification_state: 'unverified' })]),
    );
    // Admission keeps serving the previous verified version until the new one is verified.
    expect(await catalog.routeByAlias(`standard-${run}`)).toMatchObject({ version: 1, upstreamModel: 'gpt-test' });
    const reverified = await call('POST', `/routes/${routeId}/verify`, tokens.operator, {});
    expect(reverified.status).toBe(200);
    expect(await catalog.routeByAlias(`standard-${run}`)).toMatchObject({ version: 2, upstreamModel: 'gpt-test-2' });
  });

  it('adds immutable price revisions (operator or finance), money as integer strings', async () => {
    const routeId = `rt-priced-${run}`;
    await call('POST', '/routes', tokens.operator, contract({ id: routeId, alias: `priced-${run}` }));
    const price = await call('POST', `/routes/${routeId}/prices`, tokens.finance, {
      input_per_mtok_microusd: '2500000',
      cached_input_per_mtok_microusd: 1250000,
      output_per_mtok_microusd: '10000000',
      reasoning_per_mtok_microusd: '10000000',
    });
    // A route's first price is approved by a second operator before it is written.
    expect(price.status).toBe(202);
    expect((await call('POST', `/change-requests/${price.body.id}/approve`, tokens.finance, {})).status).toBe(403);
    expect((await call('POST', `/change-requests/${price.body.id}/approve`, tokens.approver, {})).status).toBe(200);
    const written = await call('GET', `/routes/${routeId}`, tokens.operator);
    expect(written.body.price_in_force).toMatchObject({
      route_id: routeId,
      input_per_mtok_microusd: '2500000',
      cached_input_per_mtok_microusd: '1250000',
      created_by: `fin-${run}`,
    });
    expect(await catalog.priceAt(routeId, new Date(Date.now() + 1000))).toMatchObject({
      id: written.body.price_in_force.id,
      outputPerMTokMicrousd: 10_000_000n,
    });
    const refused = await call('POST', '/routes', tokens.finance, contract({ alias: `nope-${run}` }));
    expect(refused.status).toBe(403);
  });

  it('stores a structured revision (tiers, service tiers, fees, modality rates) and reads it back exactly', async () => {
    const routeId = `rt-tiers-${run}`;
    await call('POST', '/routes', tokens.operator, contract({ id: routeId, alias: `tiers-${run}` }));
    // A fee above 2^53 micro-USD: stored and read back without a float in between.
    const base = structuredPriceBody(`price-tiers-${run}`);
    const body = {
      ...base,
      per_call_fees: [...base.per_call_fees, { feature: 'file_search', fee_microusd: '9007199254740993', reserved_calls_per_request: 1 }],
    };
    const pending = await call('POST', `/routes/${routeId}/prices`, tokens.finance, body);
    expect(pending.status).toBe(202);
    expect((await call('POST', `/change-requests/${pending.body.id}/approve`, tokens.approver, {})).status).toBe(200);
    const route = await call('GET', `/routes/${routeId}`, tokens.operator);
    const { route_id: _r, effective_from: _e, created_at: _c, created_by: _b, reason, ...shown } = route.body.price_in_force;
    const { reason: asked, ...prices } = body;
    expect(shown).toEqual(prices);
    expect(reason).toContain(asked);
    // What admission and settlement read: the same structure, bigint for bigint.
    const price = await catalog.priceById(body.id);
    expect(price).toMatchObject({
      id: body.id,
      cacheWritePerMTokMicrousd: 1_562_500n,
      audioOutputPerMTokMicrousd: 80_000_000n,
      contextTierRule: 'whole_request',
      contextTiers: [{ aboveInputTokens: 200_000, rates: { inputPerMTokMicrousd: 2_500_000n, audioOutputPerMTokMicrousd: 120_000_000n } }],
      serviceTiers: {
        priority: { rates: { outputPerMTokMicrousd: 20_000_000n } },
        flex: {
          rates: { inputPerMTokMicrousd: 625_000n },
          contextTiers: [{ aboveInputTokens: 200_000, rates: { outputPerMTokMicrousd: 7_500_000n } }],
        },
      },
      perCallFees: [
        { feature: 'web_search', feeMicrousd: 10_000n, reservedCallsPerRequest: 5 },
        { feature: 'file_search', feeMicrousd: 9_007_199_254_740_993n, reservedCallsPerRequest: 1 },
      ],
    });
    expect(await catalog.priceAt(routeId, new Date(Date.now() + 1000))).toStrictEqual(price);
    // An identical retry is the same revision; the same id with another body is refused.
    const retried = await call('POST', `/routes/${routeId}/prices`, tokens.finance, {
      ...body,
      effective_from: route.body.price_in_force.effective_from,
    });
    expect(retried.status).toBe(201);
    const changed = await call('POST', `/routes/${routeId}/prices`, tokens.finance, { ...body, per_call_fees: [] });
    expect(changed).toMatchObject({ status: 409, body: { error: { code: 'price_revision_exists' } } });
  });

  it('refuses overlapping or unordered context tiers with a 400 naming the field, and stores nothing', async () => {
    const routeId = `rt-tiers-bad-${run}`;
    await call('POST', '/routes', tokens.operator, contract({ id: routeId, alias: `tiers-bad-${run}` }));
    const body = structuredPriceBody(`price-bad-${run}`);
    const tier = body.context_tiers[0];
    const overlapping = await call('POST', `/routes/${routeId}/prices`, tokens.finance, { ...body, context_tiers: [tier, tier] });
    expect(overlapping.status).toBe(400);
    expect(overlapping.body.error).toMatchObject({
      code: 'invalid_request',
      param: 'context_tiers.1.above_input_tokens',
      message: expect.stringMatching(/overlaps the tier before it/),
    });
    const unordered = await call('POST', `/routes/${routeId}/prices`, tokens.finance, {
      ...body,
      context_tiers: [{ ...tier, above_input_tokens: 500_000 }, tier],
    });
    expect(unordered.status).toBe(400);
    expect(unordered.body.error).toMatchObject({
      param: 'context_tiers.1.above_input_tokens',
      message: expect.stringMatching(/ascending order/),
    });
    const unknownKey = await call('POST', `/routes/${routeId}/prices`, tokens.finance, {
      ...body,
      service_tiers: { flex: { ...body.service_tiers.flex, discount: 1 } },
    });
    expect(unknownKey.body.error).toMatchObject({ code: 'invalid_request', param: 'service_tiers.flex.discount' });
    expect(await db.prisma.changeRequest.count({ where: { targetId: routeId } })).toBe(0);
  });

  it('hostile structured prices and hedge policies (1e999, a NUL, 10k-deep JSON) are 400s; nothing is stored or requested', async () => {
    const routeId = `rt-hostile-${run}`;
    await call('POST', '/routes', tokens.operator, contract({ id: routeId, alias: `hostile-${run}` }));
    const wl = `wl-hostile-${run}`;
    await approvedWorkload(await call('PUT', `/workloads/${wl}`, tokens.operator, workload()));
    const price = JSON.stringify(structuredPriceBody(`price-hostile-${run}`));
    const hedge = JSON.stringify(hedgePolicyBody());
    const deep = '['.repeat(10_000) + ']'.repeat(10_000);
    const prices = `/routes/${routeId}/prices`;
    const hedging = `/workloads/${wl}/hedging`;
    const cases: Array<[string, string, string]> = [
      [prices, price.replace('"above_input_tokens":200000', '"above_input_tokens":1e999'), 'context_tiers.0.above_input_tokens'],
      [prices, price.replace('"fee_microusd":"10000"', '"fee_microusd":"1e999"'), 'per_call_fees.0.fee_microusd'],
      [prices, price.replace('"flex":', '"fl\\u0000ex":'), ''],
      [prices, price.replace('"context_tier_rule":"whole_request"', `"context_tier_rule":"whole_request","context_tiers":${deep}`), ''],
      [hedging, hedge.replace('"max_attempts":3', '"max_attempts":1e999'), 'allowance.max_attempts'],
      [hedging, hedge.replace('"owner":"search-team"', '"owner":"search\\u0000team"'), 'owner'],
      [hedging, hedge.replace('"owner":"search-team"', `"owner":${deep}`), ''],
    ];
    for (const [path, text, param] of cases) {
      const res = await fetch(`${policy.url}${path}`, {
        method: path === prices ? 'POST' : 'PUT',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${path === prices ? tokens.finance : tokens.operator}` },
        body: text,
      });
      expect({ path, status: res.status }).toEqual({ path, status: 400 });
      const body = (await res.json()) as { error: { code: string; param: string | null } };
      expect(body.error.code).toBe('invalid_request');
      // where the refusal can name the field, it does (a 10k-deep value is refused before any field is read)
      if (param) expect(body.error.param ?? '').toContain(param.split('.').pop());
    }
    expect(await db.prisma.priceRevision.count({ where: { routeId } })).toBe(0);
    expect(await db.prisma.hedgePolicyRevision.count({ where: { workloadId: wl } })).toBe(0);
    expect(
      await db.prisma.changeRequest.count({ where: { targetId: { in: [routeId, wl] }, kind: { in: ['price_revision', 'hedge_policy'] } } }),
    ).toBe(0);
  });

  it('hostile experiment designs and control thresholds (1e999, a NUL, 10k-deep JSON, another spelling) are 400s; nothing is stored or requested', async () => {
    const wl = `wl-hostile-exp-${run}`;
    await approvedWorkload(await call('PUT', `/workloads/${wl}`, tokens.operator, workload()));
    const exp = JSON.stringify(experimentBody('some-revision'));
    const deep = '['.repeat(10_000) + ']'.repeat(10_000);
    const experiments = `/workloads/${wl}/experiments`;
    const controls = `/workloads/${wl}/controls`;
    const cases: Array<[string, 'POST' | 'PUT', string, string]> = [
      [experiments, 'POST', exp.replace('"holdout_share_bps":1000', '"holdout_share_bps":1e999'), 'holdout_share_bps'],
      [
        experiments,
        'POST',
        exp.replace('"overhead_microusd_per_attempt":"20"', '"overhead_microusd_per_attempt":"1e999"'),
        'overhead_microusd_per_attempt',
      ],
      [experiments, 'POST', exp.replace('"owner":"search-team"', '"owner":"search\\u0000team"'), 'owner'],
      [experiments, 'POST', exp.replace('"holdout_share_bps":1000', '"holdoutShareBps":1000'), ''],
      [experiments, 'POST', exp.replace('"seed":11', `"seed":${deep}`), ''],
      [controls, 'PUT', JSON.stringify({ exception_budget_share: 1e999, reason: 'x' }).replace('null', '1e999'), 'exception_budget_share'],
      [controls, 'PUT', JSON.stringify({ reason: 'a\u0000b', shift: { min_sample: 50 } }), ''],
      [controls, 'PUT', `{"reason":"x","shift":${deep}}`, ''],
    ];
    for (const [path, method, text, param] of cases) {
      const res = await fetch(`${policy.url}${path}`, {
        method,
        headers: { 'content-type': 'application/json', authorization: `Bearer ${tokens.operator}` },
        body: text,
      });
      expect({ path, text: text.slice(0, 60), status: res.status }).toEqual({ path, text: text.slice(0, 60), status: 400 });
      const body = (await res.json()) as { error: { code: string; param: string | null } };
      expect(body.error.code).toBe('invalid_request');
      if (param) expect(body.error.param ?? '').toContain(param);
    }
    expect(await db.prisma.experiment.count({ where: { workloadId: wl } })).toBe(0);
    expect(await db.prisma.changeRequest.count({ where: { targetId: wl, kind: 'experiment' } })).toBe(0);
    expect(await db.prisma.controlThreshold.count({ where: { workloadId: wl } })).toBe(0);
  });

  it('a lowered service-tier rate is a change request a different approver must approve', async () => {
    const routeId = `rt-tiers-low-${run}`;
    await call('POST', '/routes', tokens.operator, contract({ id: routeId, alias: `tiers-low-${run}` }));
    const body = structuredPriceBody(`price-low-${run}`);
    const first = await call('POST', `/routes/${routeId}/prices`, tokens.finance, body);
    expect((await call('POST', `/change-requests/${first.body.id}/approve`, tokens.approver, {})).status).toBe(200);
    const cheaper = {
      ...body,
      id: `price-low2-${run}`,
      effective_from: new Date(Date.now() + DAY_MS).toISOString(),
      context_tiers: [{ ...body.context_tiers[0], rates: { ...body.context_tiers[0].rates, output_per_mtok_microusd: '14000000' } }],
    };
    const pending = await call('POST', `/routes/${routeId}/prices`, tokens.requester, cheaper);
    expect(pending.status).toBe(202);
    expect(pending.body.raises).toEqual(['context tier above 200000 input tokens: outputPerMTokMicrousd lowered']);
    expect((await call('POST', `/change-requests/${pending.body.id}/approve`, tokens.requester, {})).body.error).toMatchObject({
      code: 'self_approval',
    });
    expect(await catalog.priceById(cheaper.id)).toBeNull();
    expect((await call('POST', `/change-requests/${pending.body.id}/approve`, tokens.approver, {})).status).toBe(200);
    expect(await catalog.priceById(cheaper.id)).toMatchObject({ contextTiers: [{ rates: { outputPerMTokMicrousd: 14_000_000n } }] });
  });

  it('keeps an upstream credential by name: stored, shown and read by admission; a key-looking value is refused; a change is four-eyes', async () => {
    const routeId = `rt-cred-${run}`;
    const alias = `cred-${run}`;
    const bad = await call('POST', '/routes', tokens.operator, contract({ id: routeId, alias, credential_ref: 'sk-live-abc123' }));
    expect(bad.status).toBe(400);
    expect(bad.body.error).toMatchObject({ code: 'invalid_request', param: 'credential_ref' });
    expect(JSON.stringify(bad.body)).not.toContain('sk-live-abc123');
    const created = await call('POST', '/routes', tokens.operator, contract({ id: routeId, alias, credential_ref: 'OPENAI_INT' }));
    expect(created.status).toBe(201);
    expect(created.body.contract).toMatchObject({ credential_ref: 'OPENAI_INT' });
    expect(await catalog.routeByAlias(alias)).toMatchObject({ routeId, credentialRef: 'OPENAI_INT' });
    const changed = await call('PUT', `/routes/${routeId}/contract`, tokens.operator, contract({ alias, credential_ref: 'OPENAI_OTHER' }));
    expect(changed.status).toBe(202);
    expect(changed.body).toMatchObject({ kind: 'route_contract', raises: ['credential_ref changed'] });
    expect((await call('POST', `/change-requests/${changed.body.id}/approve`, tokens.approver, {})).status).toBe(200);
    const after = await call('GET', `/routes/${routeId}`, tokens.operator);
    expect(after.body).toMatchObject({
      current_version: 2,
      verification_state: 'unverified',
      contract: { credential_ref: 'OPENAI_OTHER' },
    });
  });
});

describe('workloads and keys', () => {
  it('sets a workload policy, issues a key shown once, refuses that key on the policy API (403), and revokes it', async () => {
    const wl = `wl-keys-${run}`;
    const put = await approvedWorkload(await call('PUT', `/workloads/${wl}`, tokens.operator, workload()));
    expect(put.body).toMatchObject({
      id: wl,
      budget_microusd: '5000000',
      default_max_candidates: 1,
      budget_period: 'month',
      allow_provider_storage: false,
      keys: [],
    });

    const issued = await call('POST', `/workloads/${wl}/keys`, tokens.operator);
    expect(issued.status).toBe(201);
    const key: string = issued.body.key;
    expect(key).toMatch(/^gw_[A-Za-z0-9_-]{43}$/);
    expect(await catalog.workloadByKeyHash(hashCredential(key))).toMatchObject({ id: wl });

    const asApp = await call('GET', `/workloads/${wl}`, key);
    expect(asApp.status).toBe(403);
    expect(asApp.body.error.code).toBe('forbidden');
    expect((await call('POST', '/exceptions', key, {})).status).toBe(403);

    const read = await call('GET', `/workloads/${wl}`, tokens.operator);
    expect(read.body.keys).toEqual([expect.objectContaining({ id: issued.body.id, key_prefix: key.slice(0, 11), status: 'active' })]);
    expect(JSON.stringify(read.body)).not.toContain(key);

    expect((await call('POST', `/workloads/${wl}/keys/${issued.body.id}/revoke`, tokens.operator, {})).status).toBe(400);
    const revoked = await call('POST', `/workloads/${wl}/keys/${issued.body.id}/revoke`, tokens.operator, { reason: 'rotated' });
    expect(revoked.status).toBe(200);
    expect(revoked.body).toMatchObject({ status: 'revoked', revoked_reason: 'rotated', revoked_by: `olga-${run}` });
    expect(await catalog.workloadByKeyHash(hashCredential(key))).toBeNull();
    // A revoked key is no credential at all any more.
    expect((await call('GET', `/workloads/${wl}`, key)).status).toBe(401);
    expect(
      (await call('POST', `/workloads/${wl}/keys/${issued.body.id}/revoke`, tokens.operator, { reason: 'again' })).body.error.code,
    ).toBe('key_already_revoked');
  });
});

describe('hedge policies', () => {
  it('a first policy → 202 → self-approval refused (403) → another approver → in force, announced; lowering applies at once', async () => {
    const wl = `wl-hedge-${run}`;
    await approvedWorkload(await call('PUT', `/workloads/${wl}`, tokens.operator, workload()));
    const pending = await call('PUT', `/workloads/${wl}/hedging`, tokens.requester, hedgePolicyBody({ reason: 'p95 tail' }));
    expect(pending.status).toBe(202);
    // a retried PUT finds the request it filed instead of filing a second one
    const retried = await call('PUT', `/workloads/${wl}/hedging`, tokens.requester, hedgePolicyBody({ reason: 'p95 tail' }));
    expect(retried.status).toBe(202);
    expect(retried.body.id).toBe(pending.body.id);
    expect(pending.body).toMatchObject({ kind: 'hedge_policy', target_id: wl, raises: ['first hedge policy allowing extra attempts'] });
    const self = await call('POST', `/change-requests/${pending.body.id}/approve`, tokens.requester, {});
    expect(self.status).toBe(403);
    expect(self.body.error).toMatchObject({ code: 'self_approval' });
    expect((await call('GET', `/workloads/${wl}/hedging`, tokens.operator)).body).toMatchObject({ in_force: [], history: [] });
    expect((await call('POST', `/change-requests/${pending.body.id}/approve`, tokens.approver, {})).status).toBe(200);

    const approved = await call('GET', `/workloads/${wl}/hedging`, tokens.operator);
    expect(approved.status).toBe(200);
    expect(approved.body.in_force).toEqual([
      expect.objectContaining({
        workload_id: wl,
        route_id: null,
        revision: 1,
        owner: 'search-team',
        allowance: { max_attempts: 3, max_extra_spend_microusd: '10000' },
        stop: expect.objectContaining({ spend_floor_microusd: '1000' }),
        experiment_allowance: { budget_microusd: '5000000', period: 'month' },
        created_by: `alice-${run}`,
      }),
    ]);
    const announced = await eventually(() => changes.find((c) => c.entity === 'hedge_policy' && c.entity_id === wl));
    expect(announced).toMatchObject({ change: expect.stringContaining('revision 1'), actor: `alice-${run}` });

    const lower = await call('PUT', `/workloads/${wl}/hedging`, tokens.operator, hedgePolicyBody({ enabled: false, reason: 'incident' }));
    expect(lower.status).toBe(201);
    expect(lower.body).toMatchObject({ revision: 2, enabled: false, created_by: `olga-${run}`, reason: 'incident' });
    // PUT is idempotent: the same policy again answers the revision in force and adds none
    const again = await call('PUT', `/workloads/${wl}/hedging`, tokens.operator, hedgePolicyBody({ enabled: false, reason: 'retry' }));
    expect(again.body).toMatchObject({ revision: 2, reason: 'incident' });
    const history = await call('GET', `/workloads/${wl}/hedging`, tokens.operator);
    expect(history.body.history.map((r: { revision: number }) => r.revision)).toEqual([2, 1]);
    expect(history.body.in_force.map((r: { revision: number }) => r.revision)).toEqual([2]);
  });

  it('the revision in force on a route is its own latest, else the workload-wide latest', async () => {
    const wl = `wl-hedge-route-${run}`;
    const routeId = `rt-hedge-${run}`;
    await call('POST', '/routes', tokens.operator, contract({ id: routeId }));
    await approvedWorkload(await call('PUT', `/workloads/${wl}`, tokens.operator, workload()));
    const hedging = new HedgePolicyRepository(db, new OutboxRepository(db));
    expect(await hedging.hedgePolicyFor(wl, routeId)).toBeNull();
    const first = await call('PUT', `/workloads/${wl}/hedging`, tokens.operator, hedgePolicyBody());
    expect((await call('POST', `/change-requests/${first.body.id}/approve`, tokens.approver, {})).status).toBe(200);
    const routeOnly = hedgePolicyBody({ route_id: routeId, allowance: { max_attempts: 2, max_extra_spend_microusd: 5000 } });
    const scoped = await call('PUT', `/workloads/${wl}/hedging`, tokens.operator, routeOnly);
    expect(scoped.status).toBe(201);
    expect(scoped.body).toMatchObject({ route_id: routeId, revision: 1 });

    await expect(hedging.hedgePolicyFor(wl, routeId)).resolves.toMatchObject({
      revisionId: scoped.body.id,
      routeId,
      allowance: { maxAttempts: 2, maxExtraSpendMicrousd: 5000n },
    });
    await expect(hedging.hedgePolicyFor(wl, `rt-other-${run}`)).resolves.toMatchObject({ routeId: null, revision: 1 });
    await expect(hedging.hedgePolicyFor(wl, null)).resolves.toMatchObject({ routeId: null, allowance: { maxAttempts: 3 } });
    const view = await call('GET', `/workloads/${wl}/hedging`, tokens.operator);
    expect(view.body.in_force.map((r: { route_id: string | null }) => r.route_id)).toEqual([null, routeId]);
  });

  it('concurrent writers of the workload-wide scope (route_id NULL) get distinct, gap-free revision numbers', async () => {
    const wl = `wl-hedge-race-${run}`;
    await approvedWorkload(await call('PUT', `/workloads/${wl}`, tokens.operator, workload()));
    const none = hedgePolicyBody({
      enabled: false,
      retry: { transient: [], max_retries: 0 },
      allowance: { max_attempts: 1, max_extra_spend_microusd: 0 },
    });
    // six different policies (a repeated identical PUT is not a new revision)
    const results = await Promise.all(
      Array.from({ length: 6 }, (_, i) => call('PUT', `/workloads/${wl}/hedging`, tokens.operator, { ...none, owner: `team-${i}` })),
    );
    expect(results.map((r) => r.status)).toEqual(Array(6).fill(201));
    expect(results.map((r) => r.body.revision as number).sort((a, b) => a - b)).toEqual([1, 2, 3, 4, 5, 6]);
  });

  it('refuses a bad body with a 400 naming the field, and an unknown workload or route with 404', async () => {
    const wl = `wl-hedge-bad-${run}`;
    await approvedWorkload(await call('PUT', `/workloads/${wl}`, tokens.operator, workload()));
    const bad = async (body: unknown) => (await call('PUT', `/workloads/${wl}/hedging`, tokens.operator, body)).body.error;
    await expect(bad(hedgePolicyBody({ retry: { transient: [], max_retries: 3 } }))).resolves.toMatchObject({
      code: 'invalid_request',
      param: 'retry.max_retries',
    });
    const quantile = { kind: 'quantile', quantile_per_mille: 0, floor_ms: 0, ceiling_ms: 10, min_samples: 1 };
    await expect(bad(hedgePolicyBody({ delay: quantile }))).resolves.toMatchObject({ param: 'delay.quantile_per_mille' });
    await expect(bad(hedgePolicyBody({ owner: undefined }))).resolves.toMatchObject({ param: 'owner' });
    await expect(bad(hedgePolicyBody({ max_hedges: 1, extra: 1 }))).resolves.toMatchObject({ param: 'extra' });
    expect((await call('PUT', `/workloads/nobody-${run}/hedging`, tokens.operator, hedgePolicyBody())).status).toBe(404);
    const noRoute = await call('PUT', `/workloads/${wl}/hedging`, tokens.operator, hedgePolicyBody({ route_id: `rt-none-${run}` }));
    expect(noRoute.status).toBe(404);
    expect(noRoute.body.error).toMatchObject({ code: 'not_found', param: 'route_id' });
    expect((await call('GET', `/workloads/${wl}/hedging`, tokens.operator)).body.history).toEqual([]);
  });
});

describe('hedging experiments', () => {
  it('file → 202 → self-approval refused → another approver starts it (announced); a second is 409; stop applies at once', async () => {
    const wl = `wl-exp-${run}`;
    await approvedWorkload(await call('PUT', `/workloads/${wl}`, tokens.operator, workload()));
    const policy = await call('PUT', `/workloads/${wl}/hedging`, tokens.operator, hedgePolicyBody());
    expect((await call('POST', `/change-requests/${policy.body.id}/approve`, tokens.approver, {})).status).toBe(200);
    const revisionId: string = (await call('GET', `/workloads/${wl}/hedging`, tokens.operator)).body.in_force[0].id;

    const filed = await call('POST', `/workloads/${wl}/experiments`, tokens.requester, experimentBody(revisionId));
    expect(filed.status).toBe(202);
    expect(filed.body).toMatchObject({ kind: 'experiment', target_id: wl, status: 'pending' });
    const self = await call('POST', `/change-requests/${filed.body.id}/approve`, tokens.requester, {});
    expect(self.status).toBe(403);
    expect(self.body.error).toMatchObject({ code: 'self_approval' });
    expect((await call('GET', `/workloads/${wl}/experiments`, tokens.operator)).body).toEqual({ workload_id: wl, experiments: [] });
    expect((await call('POST', `/change-requests/${filed.body.id}/approve`, tokens.approver, {})).status).toBe(200);

    const listed = await call('GET', `/workloads/${wl}/experiments`, tokens.operator);
    expect(listed.body.experiments).toEqual([
      expect.objectContaining({
        status: 'running',
        hedge_policy_revision_id: revisionId,
        approved_premium_microusd: '2000',
        acceptance: { non_empty_content: true, allowed_finish_reasons: ['stop', 'STOP'], refusals_invalid: true },
        requested_by: `alice-${run}`,
        approved_by: `bob-${run}`,
      }),
    ]);
    const id: string = listed.body.experiments[0].id;
    // the record is the listed one plus its pauses (none recorded)
    expect((await call('GET', `/experiments/${id}`, tokens.finance)).body).toEqual({ ...listed.body.experiments[0], pauses: [] });
    const announced = await eventually(() => changes.find((c) => c.entity === 'experiment' && c.entity_id === id));
    expect(announced).toMatchObject({ actor: `bob-${run}`, change: expect.stringContaining(`started on workload ${wl}`) });

    const second = await call('POST', `/workloads/${wl}/experiments`, tokens.requester, experimentBody(revisionId, { seed: 2 }));
    expect(second.status).toBe(409);
    expect(second.body.error).toMatchObject({ code: 'experiment_running' });

    const stopped = await call('POST', `/experiments/${id}/stop`, tokens.operator, { reason: 'enough' });
    expect(stopped.status).toBe(200);
    expect(stopped.body).toMatchObject({ status: 'stopped', stopped_by: `olga-${run}`, stop_reason: 'enough' });
    expect((await call('POST', `/experiments/${id}/stop`, tokens.operator, { reason: 'again' })).body).toEqual(stopped.body);
    expect((await call('POST', `/experiments/${id}/stop`, tokens.finance, { reason: 'x' })).status).toBe(403);
  });

  it("refuses another workload's policy revision (404), a bad design (400 naming the field) and an unknown experiment (404)", async () => {
    const wl = `wl-exp2-${run}`;
    await approvedWorkload(await call('PUT', `/workloads/${wl}`, tokens.operator, workload()));
    const foreign = await call('POST', `/workloads/${wl}/experiments`, tokens.operator, experimentBody('some-other-revision'));
    expect(foreign.status).toBe(404);
    expect(foreign.body.error).toMatchObject({ code: 'not_found', param: 'hedge_policy_revision_id' });
    const bad = await call('POST', `/workloads/${wl}/experiments`, tokens.operator, experimentBody('r', { holdout_share_bps: 9000 }));
    expect(bad.status).toBe(400);
    expect(bad.body.error).toMatchObject({ code: 'invalid_request', param: 'holdout_share_bps' });
    expect((await call('GET', `/experiments/exp-nope-${run}`, tokens.operator)).status).toBe(404);
    expect((await call('POST', `/experiments/exp-nope-${run}/stop`, tokens.operator, { reason: 'x' })).status).toBe(404);
  });
});

describe('exceptions', () => {
  it('request → self-approval refused (403) → approved by another approver → revoked; audited and announced', async () => {
    const routeId = `rt-exc-${run}`;
    const wl = `wl-exc-${run}`;
    await call('POST', '/routes', tokens.operator, contract({ id: routeId, alias: `exc-${run}` }));
    // the projection needs a price in force: $2.50 in, $10 out per MTok
    const price = await call('POST', `/routes/${routeId}/prices`, tokens.finance, {
      id: `price-exc-${run}`,
      input_per_mtok_microusd: '2500000',
      cached_input_per_mtok_microusd: '1250000',
      output_per_mtok_microusd: '10000000',
      reasoning_per_mtok_microusd: '10000000',
    });
    expect((await call('POST', `/change-requests/${price.body.id}/approve`, tokens.approver, {})).status).toBe(200);
    await approvedWorkload(await call('PUT', `/workloads/${wl}`, tokens.operator, workload({ allowed_aliases: [`exc-${run}`] })));

    const requested = await call('POST', '/exceptions', tokens.requester, {
      owner: 'search-team',
      workload_id: wl,
      route_id: routeId,
      max_candidates: 3,
      per_candidate_output_ceiling: 128,
      budget_microusd: '2000000',
      expires_at: new Date(Date.now() + 7 * DAY_MS).toISOString(),
      justification: 'reranking experiment',
      allows_streaming: false,
      outcome: { metric: 'answer acceptance rate', baseline: 0.6, target: 0.7 },
      expected_requests: 200,
      typical_input_tokens: 500,
    });
    expect(requested.status).toBe(201);
    expect(requested.body).toMatchObject({ status: 'requested', requested_by: `alice-${run}`, budget_microusd: '2000000' });
    // 200 × (500 × $2.50 + 3 × 128 × $10 per MTok) = 200 × 5,090 micro-USD
    expect(requested.body.projection.at_request).toMatchObject({
      cost_microusd: '1018000',
      exceeds_budget: false,
      price_revision_id: `price-exc-${run}`,
      route_id: routeId,
    });
    const id: string = requested.body.id;
    expect(await catalog.activeExceptions(wl, new Date())).toEqual([]);

    const self = await call('POST', `/exceptions/${id}/approve`, tokens.requester, {});
    expect(self.status).toBe(403);
    expect(self.body.error).toMatchObject({ code: 'self_approval' });
    expect((await call('POST', `/exceptions/${id}/approve`, tokens.operator, {})).status).toBe(403);

    const approved = await call('POST', `/exceptions/${id}/approve`, tokens.approver, { reason: 'bounded and budgeted' });
    expect(approved.status).toBe(200);
    expect(approved.body).toMatchObject({
      status: 'active',
      projection: { at_approval: { cost_microusd: '1018000', price_revision_id: `price-exc-${run}` }, override_reason: null },
    });
    expect(await catalog.activeExceptions(wl, new Date())).toEqual([
      expect.objectContaining({ id, maxCandidates: 3, budgetMicrousd: 2_000_000n }),
    ]);

    const listed = await call('GET', `/exceptions?workload_id=${wl}`, tokens.approver);
    expect(listed.body.exceptions).toEqual([expect.objectContaining({ id, status: 'active' })]);

    expect((await call('POST', `/exceptions/${id}/revoke`, tokens.operator, {})).status).toBe(400);
    const revoked = await call('POST', `/exceptions/${id}/revoke`, tokens.operator, { reason: 'experiment over' });
    expect(revoked.status).toBe(200);
    expect(revoked.body.status).toBe('revoked');
    // Admission reads exceptions per request: the revocation applies to the very next one.
    expect(await catalog.activeExceptions(wl, new Date())).toEqual([]);

    const audited = await call('GET', `/exceptions/${id}`, tokens.operator);
    expect(
      audited.body.events.map((e: { event: string; from_status: string | null; to_status: string; actor: string }) => [
        e.event,
        e.from_status,
        e.to_status,
        e.actor,
      ]),
    ).toEqual([
      ['request', null, 'requested', `alice-${run}`],
      ['approve', 'requested', 'active', `bob-${run}`],
      ['revoke', 'active', 'revoked', `olga-${run}`],
    ]);
    const again = await call('POST', `/exceptions/${id}/approve`, tokens.approver, {});
    expect(again.status).toBe(409);
    expect(again.body.error.code).toBe('invalid_transition');

    await eventually(() => (changes.filter((c) => c.entity === 'exception' && c.entity_id === id).length === 3 ? true : undefined), {
      what: 'three policyChanged events on Kafka',
      timeoutMs: 20_000,
    });
    expect(changes.filter((c) => c.entity_id === id).map((c) => c.change)).toEqual([
      'request: none -> requested',
      'approve: requested -> active',
      'revoke: active -> revoked',
    ]);
  });
});

describe('authentication and validation', () => {
  it('401 without or with an unknown token', async () => {
    expect((await call('GET', '/routes')).status).toBe(401);
    const unknown = await call('GET', '/routes', 'op_not-a-token');
    expect(unknown.status).toBe(401);
    expect(unknown.body.error.code).toBe('unauthorized');
  });

  it.each<[string, string, string, unknown, string | null]>([
    ['a float candidate maximum', 'POST', '/routes', contract({ max_candidates: 2.5 }), 'max_candidates'],
    ['an undeclared candidate parameter', 'POST', '/routes', { ...contract(), candidate_param: undefined }, 'candidate_param'],
    ['an unknown field', 'POST', '/routes', { ...contract(), colour: 'blue' }, 'colour'],
    ['a non-http upstream', 'POST', '/routes', contract({ upstream_base_url: 'ftp://x' }), 'upstream_base_url'],
    ['a float budget', 'PUT', `/workloads/wl-bad-${run}`, workload({ budget_microusd: 1.5 }), 'budget_microusd'],
    ['a decimal-string budget', 'PUT', `/workloads/wl-bad-${run}`, workload({ budget_microusd: '1.50' }), 'budget_microusd'],
    ['an unknown budget period', 'PUT', `/workloads/wl-bad-${run}`, workload({ budget_period: 'week' }), 'budget_period'],
    ['an int4 overflow', 'PUT', `/workloads/wl-bad-${run}`, workload({ deadline_ms: 2 ** 40 }), 'deadline_ms'],
    // issue 7 item 7: products that would overflow a reservation's columns at admission
    [
      'a ceiling whose reservation overflows int4',
      'PUT',
      `/workloads/wl-bad-${run}`,
      workload({ per_candidate_output_ceiling: 2_147_483_647 }),
      'per_candidate_output_ceiling',
    ],
    [
      'a count × ceiling past the bound',
      'PUT',
      `/workloads/wl-bad-${run}`,
      workload({ default_max_candidates: 8, per_candidate_output_ceiling: 300_000_000 }),
      'per_candidate_output_ceiling',
    ],
    [
      'a token quota whose window overflows',
      'PUT',
      `/workloads/wl-bad-${run}`,
      workload({ tokens_per_minute: 2 ** 31 - 1 }),
      'tokens_per_minute',
    ],
    [
      'a price whose worst reservation overflows bigint',
      'POST',
      `/routes/rt-priced-${run}/prices`,
      {
        input_per_mtok_microusd: '1',
        cached_input_per_mtok_microusd: '1',
        output_per_mtok_microusd: '9000000000000000',
        reasoning_per_mtok_microusd: '1',
      },
      'output_per_mtok_microusd',
    ],
    [
      'an exception whose count × ceiling overflows',
      'POST',
      '/exceptions',
      {
        owner: 'o',
        workload_id: `wl-keys-${run}`,
        max_candidates: 4,
        per_candidate_output_ceiling: 600_000_000,
        budget_microusd: '1',
        expires_at: new Date(Date.now() + DAY_MS).toISOString(),
        justification: 'j',
        ...evidence,
      },
      'per_candidate_output_ceiling',
    ],
    [
      'an exception without justification',
      'POST',
      '/exceptions',
      {
        owner: 'o',
        workload_id: 'w',
        max_candidates: 2,
        per_candidate_output_ceiling: 1,
        budget_microusd: '1',
        expires_at: new Date(Date.now() + DAY_MS).toISOString(),
        ...evidence,
      },
      'justification',
    ],
    [
      'an exception for 91 days',
      'POST',
      '/exceptions',
      {
        owner: 'o',
        workload_id: `wl-keys-${run}`,
        max_candidates: 2,
        per_candidate_output_ceiling: 1,
        budget_microusd: '1',
        expires_at: new Date(Date.now() + 91 * DAY_MS).toISOString(),
        justification: 'j',
        ...evidence,
      },
      'expires_at',
    ],
    ['a JSON array body', 'POST', '/routes', [1, 2], null],
  ])('400 invalid_request for %s', async (_what, method, path, body, param) => {
    const res = await call(method, path, tokens.requester, body);
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ code: 'invalid_request', type: 'invalid_request_error', param });
  });

  it('names the bound when count × ceiling cannot be reserved, and stores nothing', async () => {
    const wl = `wl-huge-${run}`;
    const res = await call('PUT', `/workloads/${wl}`, tokens.operator, workload({ per_candidate_output_ceiling: 2_147_483_647 }));
    expect(res.status).toBe(400);
    expect(res.body.error.message).toMatch(/2147483647 output tokens, above the 2130706431 one reservation can hold/);
    expect((await call('GET', `/workloads/${wl}`, tokens.operator)).status).toBe(404);
  });

  it('400 invalid_request for a body that is not JSON', async () => {
    const res = await fetch(`${policy.url}/routes`, {
      method: 'POST',
      headers: { authorization: `Bearer ${tokens.operator}`, 'content-type': 'application/json' },
      body: '{"alias":',
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('invalid_request');
  });

  it('413 payload_too_large for a body over the limit, through the one exception filter', async () => {
    const res = await fetch(`${policy.url}/routes`, {
      method: 'POST',
      headers: { authorization: `Bearer ${tokens.operator}`, 'content-type': 'application/json' },
      body: JSON.stringify({ ...contract(), reason: 'x'.repeat(3 * 1024 * 1024) }),
    });
    expect(res.status).toBe(413);
    expect(res.headers.get('x-should-retry')).toBe('false');
    expect(((await res.json()) as { error: { code: string } }).error).toMatchObject({ code: 'payload_too_large' });
  });

  it('404 not_found for an unknown path, in the same error shape', async () => {
    const res = await call('GET', '/nowhere', tokens.operator);
    expect(res.status).toBe(404);
    expect(res.body.error).toMatchObject({ code: 'not_found', type: 'invalid_request_error', param: null });
  });

  it('publishes its OpenAPI document', async () => {
    const doc = (await (await fetch(`${policy.url}/docs/openapi.json`)).json()) as any;
    expect(Object.keys(doc.paths)).toEqual(
      expect.arrayContaining(['/routes', '/routes/{id}/verify', '/workloads/{id}/keys', '/exceptions/{id}/approve']),
    );
    expect(doc.paths['/routes'].post.requestBody.content['application/json'].schema.required).toEqual(
      expect.arrayContaining(['alias', 'provider_kind', 'candidate_param']),
    );
  });
});

function contract(overrides: Record<string, unknown> = {}) {
  // nothing here calls the upstream (probes are tested end to end)
  return openAiContractBody('http://127.0.0.1:9', {
    alias: `alias-${randomBytes(3).toString('hex')}-${run}`,
    ...overrides,
  });
}

function workload(overrides: Record<string, unknown> = {}) {
  return {
    team: 'search',
    environment: 'test',
    per_candidate_output_ceiling: 256,
    budget_microusd: '5000000',
    budget_period: 'month',
    ...overrides,
  };
}

async function call(method: string, path: string, token?: string, body?: unknown): Promise<{ status: number; body: any }> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (token) headers.authorization = `Bearer ${token}`;
  const res = await fetch(`${policy.url}${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null };
}

/** A write that raised spend came back 202 with a change request: a second operator approves it, then the target is read back. */
async function approvedWorkload(res: { status: number; body: any }): Promise<{ status: number; body: any }> {
  expect(res.status).toBe(202);
  const decided = await call('POST', `/change-requests/${res.body.id}/approve`, tokens.approver, {});
  expect(decided.status).toBe(200);
  return call('GET', `/workloads/${res.body.target_id}`, tokens.operator);
}
