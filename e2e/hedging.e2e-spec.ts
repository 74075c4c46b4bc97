import { DEFAULT_PRICES, hedgeSettings } from '@gateway/testing';
import { actionStatus, settledAction } from './actions';
import { countingFetch, eventually, failureOf, openai, SDK_ERRORS, simLastSeq, simRequestsSince, stack, uid, withSeeder } from './support';

/**
 * Issue 10 through the official `openai` SDK: a hedge after a slow primary, a retry after a
 * transient 503, a fallback when the primary route is down, a hedge the allowance denies, and the
 * SDK told not to retry on top of the gateway's own retries. Each route has its own hedge policy
 * (route-scoped revisions of one workload), stored by the same row writer the policy service uses.
 */
describe('hedges, retries and fallbacks (issue 10)', () => {
  const run = uid();
  const workloadId = `h-wl-${run}`;
  const slow = `h-slow-${run}`;
  const stingy = `h-stingy-${run}`;
  const flaky = `h-flaky-${run}`;
  const down = `h-down-${run}`;
  const backup = `h-backup-${run}`;
  const broken = `h-broken-${run}`;
  const funded = `h-funded-${run}`;
  const settlement = process.env.E2E_SETTLEMENT_URL!;
  const reconciliation = process.env.E2E_RECONCILIATION_URL!;
  let key: string;
  let finance: string;
  let operator: string;

  /** a 200 ms fixed hedge delay, one retry, room for three attempts (`hedgeSettings`) */
  const policy = hedgeSettings;
  const noHedge = (over: Record<string, unknown> = {}) => policy({ max_hedges: 0, ...over });

  const BACKUP_PRICE = {
    inputPerMTokMicrousd: 4n * DEFAULT_PRICES.inputPerMTokMicrousd,
    cachedInputPerMTokMicrousd: 4n * DEFAULT_PRICES.cachedInputPerMTokMicrousd,
    outputPerMTokMicrousd: 4n * DEFAULT_PRICES.outputPerMTokMicrousd,
    reasoningPerMTokMicrousd: 4n * DEFAULT_PRICES.reasoningPerMTokMicrousd,
  };

  const get = async (url: string, token: string) => {
    const res = await fetch(url, { headers: { authorization: `Bearer ${token}` } });
    return { status: res.status, body: (await res.json()) as Record<string, any> };
  };
  const ledgerOf = async (actionId: string, rows: number) =>
    eventually(
      async () => {
        const l = await get(`${settlement}/ledger?action_id=${actionId}`, finance);
        return l.body.entries?.length === rows ? (l.body.entries as Array<Record<string, any>>) : undefined;
      },
      { what: `${rows} ledger rows for ${actionId}` },
    );
  const ask = (model: string, content: string) =>
    openai(key)
      .chat.completions.create({ model, messages: [{ role: 'user', content: `${content} ${run}` }] })
      .withResponse();

  beforeAll(async () => {
    await withSeeder(async (seed) => {
      const sim = { providerKind: 'openai-chat' as const, upstreamBaseUrl: stack.providerSim };
      // the first request of each body waits 8 s; the same body sent again (the hedge) answers at once
      await seed.route({ routeId: slow, alias: slow, upstreamModel: 'sim-gpt;slow-first=1:8000', ...sim });
      await seed.route({ routeId: stingy, alias: stingy, upstreamModel: 'sim-gpt;slow-first=1:1500', ...sim });
      // its contract names the upstream's idempotency header: the retry sends the primary's value
      await seed.route({
        routeId: flaky,
        alias: flaky,
        upstreamModel: 'sim-gpt;fail-first=1',
        upstreamIdempotencyHeader: 'Idempotency-Key',
        ...sim,
      });
      await seed.route({ routeId: down, alias: down, upstreamModel: 'sim-gpt;status=503', ...sim });
      // the fallback route costs four times the others, on every rate (whole micro-USD per token: 10 / 5 / 40 / 40)
      await seed.route({ routeId: backup, alias: backup, upstreamModel: 'sim-gpt', ...sim }, { price: BACKUP_PRICE });
      await seed.route({ routeId: broken, alias: broken, upstreamModel: 'sim-gpt;status=503', ...sim });
      // every request body's first send waits 1.5 s: each action's primary is slow, its hedge answers
      await seed.route({ routeId: funded, alias: funded, upstreamModel: 'sim-gpt;slow-first=1:1500', ...sim });
      key = (await seed.workload({ id: workloadId, allowedAliases: [slow, stingy, flaky, down, broken, funded], fallbackChain: [backup] }))
        .key;
      await seed.hedgePolicy(workloadId, policy(), slow);
      await seed.hedgePolicy(workloadId, policy({ allowance: { max_attempts: 3, max_extra_spend_microusd: '1' } }), stingy);
      await seed.hedgePolicy(workloadId, noHedge(), flaky);
      await seed.hedgePolicy(workloadId, noHedge({ retry: { transient: ['server_error'], max_retries: 0 } }), down);
      // `broken` has the fallback chain too, but its retry fails first and then the chain's route is tried
      await seed.hedgePolicy(workloadId, noHedge({ allowance: { max_attempts: 2, max_extra_spend_microusd: '10000000' } }), broken);
      finance = await seed.operator(`hfin-${run}`, ['finance']);
      operator = await seed.operator(`hops-${run}`, ['operator']);
    });
  });

  it('slow primary → the hedge wins; the aborted primary holds its exposure in a case, then settles from its own usage', async () => {
    const before = await simLastSeq();
    const { data, response } = await ask(slow, 'hedge me');
    expect(data.choices[0].message.content?.length).toBeGreaterThan(0);
    expect(response.headers.get('x-gateway-attempts')).toBe('2');
    expect(response.headers.get('x-gateway-winner-role')).toBe('hedge');
    const actionId = response.headers.get('x-gateway-action-id')!;

    // the loser was aborted before usage: a case holding its own hold, never zero
    const status = await eventually(
      async () => {
        const s = await actionStatus(key, actionId);
        return s.open_reconciliation_cases.length === 1 && s.attempts.every((a: any) => a.status !== 'in_flight') ? s : undefined;
      },
      { what: 'the loser case opened' },
    );
    const [primary, hedge] = status.attempts;
    expect(primary).toMatchObject({ attempt_no: 1, role: 'primary', winner: false, deadline_outcome: 'cancelled', route_id: slow });
    expect(hedge).toMatchObject({ attempt_no: 2, role: 'hedge', winner: true, deadline_outcome: 'on_time', route_id: slow });
    expect(status.winner_attempt_id).toBe(hedge.attempt_id);
    expect(primary.hold_microusd).toBe(hedge.hold_microusd);
    expect(BigInt(primary.hold_microusd)).toBeGreaterThan(0n);
    const [lossCase] = status.open_reconciliation_cases;
    // exactly the loser's own hold stays exposed: not zero, and not the winner's unused hold
    expect(lossCase.exposure_microusd).toBe(primary.hold_microusd);
    expect(BigInt(status.money_microusd.unresolved)).toBeGreaterThanOrEqual(BigInt(primary.hold_microusd));

    // the winner's ledger row is priced from its own usage
    const [winnerRow] = await ledgerOf(actionId, 1);
    expect(winnerRow).toMatchObject({ attempt_id: hedge.attempt_id, attempt_role: 'hedge', usage_source: 'provider_response' });

    // the provider saw two requests and the first was aborted; what it would bill is its usage evidence
    const seen = await eventually(
      async () => {
        const log = (await simRequestsSince(before)).filter((e) => e.model === 'sim-gpt') as Array<Record<string, any>>;
        return log.some((e) => e.aborted) ? log : undefined;
      },
      { what: 'the aborted primary in the sim log' },
    );
    const aborted = seen.find((e) => e.aborted)!;
    expect(seen.filter((e) => e.fingerprint === aborted.fingerprint)).toHaveLength(2);
    // each upstream request carried its attempt id, so the export line of the aborted one names its attempt
    expect(aborted.clientRequestId).toBe(primary.attempt_id);
    expect(seen.find((e) => e.fingerprint === aborted.fingerprint && !e.aborted)?.clientRequestId).toBe(hedge.attempt_id);
    const bill = aborted.wouldBill as { promptTokens: number; cachedTokens: number; outputTokens: number; reasoningTokens: number };
    const imported = await fetch(`${reconciliation}/cases/${lossCase.case_id}/import-usage`, {
      method: 'POST',
      headers: { authorization: `Bearer ${operator}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        provider_request_id: `sim-${aborted.seq}`,
        input_tokens: bill.promptTokens,
        cached_input_tokens: bill.cachedTokens,
        output_tokens_total: bill.outputTokens + bill.reasoningTokens,
        reasoning_tokens: bill.reasoningTokens,
      }),
    });
    expect(imported.status).toBeLessThan(300);
    const rows = await ledgerOf(actionId, 2);
    expect(rows.map((r) => [r.attempt_role, r.usage_source]).sort()).toEqual([
      ['hedge', 'provider_response'],
      ['primary', 'provider_export'],
    ]);
    const done = await settledAction(key, actionId);
    expect(done.open_reconciliation_cases).toHaveLength(0);
  });

  it('the extra-spend allowance spent → the hedge is denied and the primary still answers, alone', async () => {
    const { response } = await ask(stingy, 'no hedge for me');
    expect(response.headers.get('x-gateway-attempts')).toBe('1');
    expect(response.headers.get('x-gateway-winner-role')).toBe('primary');
    const actionId = response.headers.get('x-gateway-action-id')!;
    const status = await settledAction(key, actionId);
    expect(status.attempts).toEqual([expect.objectContaining({ role: 'primary', winner: true, deadline_outcome: 'on_time' })]);
    expect(await ledgerOf(actionId, 1)).toEqual([expect.objectContaining({ attempt_role: 'primary' })]);
  });

  it("an experiment allowance funds the hedge (its account, not the workload's, holds it); once spent, the next hedge is denied and the primary answers alone", async () => {
    // the hold of a request this long on a route at the default price: the stingy route's primary (its hedge is always denied)
    const probe = await ask(stingy, 'allowance probe');
    const probed = await settledAction(key, probe.response.headers.get('x-gateway-action-id')!);
    const hold = BigInt(probed.attempts[0].hold_microusd);
    expect(hold).toBeGreaterThan(0n);
    // room for exactly one hedge hold: after it, whatever it settles at, another does not fit
    await withSeeder((seed) =>
      seed.hedgePolicy(workloadId, policy({ experiment_allowance: { budget_microusd: (hold + 1n).toString(), period: 'month' } }), funded),
    );
    const exposureBefore = await get(`${reconciliation}/exposure?workload_id=${workloadId}`, finance);
    const workloadAccount = (body: Record<string, any>) => body.accounts.find((a: any) => a.scope === 'workload');
    const allowanceAccount = (body: Record<string, any>) => body.accounts.find((a: any) => a.scope === 'experiment_allowance');
    expect(allowanceAccount(exposureBefore.body)).toBeUndefined();

    const first = await ask(funded, 'allowance hedge');
    expect(first.response.headers.get('x-gateway-attempts')).toBe('2');
    expect(first.response.headers.get('x-gateway-winner-role')).toBe('hedge');
    const firstId = first.response.headers.get('x-gateway-action-id')!;
    const [winnerRow] = await ledgerOf(firstId, 1);
    expect(winnerRow).toMatchObject({ attempt_role: 'hedge' });
    // the allowance account holds the hedge: its cost settled there, the rest of its hold released
    const funding = await eventually(
      async () => {
        const e = await get(`${reconciliation}/exposure?workload_id=${workloadId}`, finance);
        const a = allowanceAccount(e.body);
        return a && a.settled_microusd === winnerRow.cost_microusd && a.pending_microusd === '0' ? { e: e.body, a } : undefined;
      },
      { what: 'the hedge settled on the experiment allowance' },
    );
    expect(funding.a).toMatchObject({ budget_microusd: (hold + 1n).toString(), unresolved_microusd: '0' });
    // the workload account never held the hedge: what it gained since is the aborted primary's hold alone
    const w0 = workloadAccount(exposureBefore.body);
    const w1 = workloadAccount(funding.e);
    const used = (a: any) => BigInt(a.pending_microusd) + BigInt(a.unresolved_microusd) + BigInt(a.settled_microusd);
    expect(used(w1) - used(w0)).toBe(hold);

    const second = await ask(funded, 'allowance again');
    expect(second.data.choices[0].message.content?.length).toBeGreaterThan(0);
    expect(second.response.headers.get('x-gateway-attempts')).toBe('1');
    expect(second.response.headers.get('x-gateway-winner-role')).toBe('primary');
    const status = await settledAction(key, second.response.headers.get('x-gateway-action-id')!);
    expect(status.attempts).toEqual([expect.objectContaining({ role: 'primary', winner: true })]);
  });

  it('a transient 503 → a retry answers, with the same idempotency value; two ledger rows, the failed attempt settled from the error answer', async () => {
    const before = await simLastSeq();
    const { response } = await ask(flaky, 'retry me');
    expect(response.headers.get('x-gateway-attempts')).toBe('2');
    expect(response.headers.get('x-gateway-winner-role')).toBe('retry');
    const actionId = response.headers.get('x-gateway-action-id')!;
    const rows = await ledgerOf(actionId, 2);
    expect(rows.map((r) => r.attempt_role).sort()).toEqual(['primary', 'retry']);
    // the route contract's header reached the provider on both tries, carrying the same value (the action id)
    const upstream = (await simRequestsSince(before)).filter((e) => e.directives.includes('fail-first=1'));
    expect(upstream.map((e) => [e.status, e.idempotencyKey])).toEqual([
      [503, actionId],
      [200, actionId],
    ]);
    const status = await settledAction(key, actionId);
    expect(status.attempts).toEqual([
      expect.objectContaining({ attempt_no: 1, role: 'primary', winner: false, status: 'settled' }),
      expect.objectContaining({ attempt_no: 2, role: 'retry', winner: true }),
    ]);
  });

  it('the primary route down → the fallback route answers, held and settled at its own price', async () => {
    const { response } = await ask(down, 'fall back');
    expect(response.headers.get('x-gateway-attempts')).toBe('2');
    expect(response.headers.get('x-gateway-winner-role')).toBe('fallback');
    const actionId = response.headers.get('x-gateway-action-id')!;
    const status = await settledAction(key, actionId);
    expect(status.attempts).toEqual([
      expect.objectContaining({ role: 'primary', route_id: down, winner: false }),
      expect.objectContaining({ role: 'fallback', route_id: backup, winner: true }),
    ]);
    const [primary, fallback] = status.attempts;
    // admission held the fallback at its route's (dearer) price
    expect(BigInt(fallback.hold_microusd)).toBeGreaterThan(BigInt(primary.hold_microusd));
    const rows = await ledgerOf(actionId, 2);
    const byRole = new Map(rows.map((r) => [r.attempt_role, r]));
    expect(byRole.get('primary')).toMatchObject({ price_revision: `price-${down}-v1` });
    const row = byRole.get('fallback')!;
    // priced at the fallback route's revision, not the reservation's (the primary route's)
    expect(row.price_revision).toBe(`price-${backup}-v1`);
    const cost = BigInt(row.cost_microusd);
    const c = row.cost_microusd_by_category as Record<string, string>;
    // at 10 / 5 / 40 / 40 micro-USD per token every line is exact: a plain input token costs 10, a
    // cached one 5 (so input + 2 × cached = 10 × all input), every output token (reasoning included) 40
    expect(BigInt(c.input) + 2n * BigInt(c.cached_input)).toBe(10n * BigInt(row.input_tokens));
    expect(BigInt(c.output) + BigInt(c.reasoning)).toBe(40n * BigInt(row.output_tokens_total));
    expect(cost).toBeGreaterThan(0n);
    // the hold the fallback took covers what it cost
    expect(cost).toBeLessThanOrEqual(BigInt(fallback.hold_microusd));
    expect(BigInt(status.money_microusd.settled)).toBe(cost + BigInt(byRole.get('primary')!.cost_microusd));
  });

  it('after the gateway retried, the SDK is told not to retry: one SDK call, two upstream attempts', async () => {
    const before = await simLastSeq();
    const http = countingFetch();
    const err = await failureOf(
      openai(key, 'current', { fetch: http.fetch }).chat.completions.create({
        model: broken,
        messages: [{ role: 'user', content: `give up ${run}` }],
      }),
    );
    expect(err).toBeInstanceOf(SDK_ERRORS.current.openai);
    const apiErr = err as InstanceType<typeof SDK_ERRORS.current.openai>;
    expect(apiErr.status).toBe(502);
    expect(apiErr.headers?.get('x-should-retry')).toBe('false');
    expect(apiErr.headers?.get('x-gateway-attempts')).toBe('2');
    expect(http.calls()).toBe(1);
    // the primary and the gateway's one retry; the allowance (two attempts) leaves no room for the fallback
    const upstream = (await simRequestsSince(before)).filter((e) => e.directives.includes('status=503'));
    expect(upstream.map((e) => e.status)).toEqual([503, 503]);
  });
});
