/**
 * The hedge race (issue 10, "Must hold"), on the real Postgres: in every round an admitted action's
 * primary answer (`chooseWinner(primary)`) races the hedge's serialised admission
 * (`admitExtraAttempt`, then the hedge's own `chooseWinner` when it was admitted); one round in four
 * plays a scripted interleaving instead, so every ending is seen whatever the timing. Exactly one
 * attempt wins; the hedge is either claimed — and then completed (dispatch's `complete`) and
 * settled through the real settlement use case (in batches of a few rounds racing each other, as
 * its consumer runs it), as a loser with or without usage or as the winner —
 * or never claimed (no attempt row, no hold added). One workload's hedges are funded by an
 * experiment allowance (its own budget account instead of the workload's, tight enough to refuse
 * with `experiment_allowance_spent`), whose sum rule is sampled like every other account's.
 * Four workloads with different allowances race
 * on one shared team budget tight enough that hedges (and later admissions) are refused, and a
 * read of every budget account after each step of each round (admission, the race, completion,
 * settlement) finds pending + unresolved + settled never above its
 * budget. At the end each account equals the sum of its reservations' buckets and nothing is
 * left pending.
 */
import { randomUUID } from 'node:crypto';
import { AttemptCompletedV1 } from '@gateway/contracts';
import {
  AdmissionRepository,
  AttemptOutcome,
  budgetAccountId,
  Database,
  DispatchRepository,
  ExtraAttemptDenial,
  ExtraAttemptInput,
  OutboxRepository,
} from '@gateway/db';
import { allowanceFundingOf, EXPERIMENT_ALLOWANCE_SCOPE } from '@gateway/domain';
import { admitInput, answeredAttemptEvent, primaryClaim } from '@gateway/testing';
import { SettleOutcome } from '../src/usecases/settle-attempt/settle-attempt.usecase';
import { settleOnPostgres, uniqueRoute } from './settle-on-postgres';

const url = process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/gateway_test';
const PERIOD = new Date('2026-12-01T00:00:00Z');
const ROUNDS = Number(process.env.HEDGE_RACE_ROUNDS ?? 1000);
/** rounds in flight at once */
const GROUP = 16;
/** rounds whose events settle in one batch */
const SETTLE_ROUNDS = 4;
/** the primary's reservation and the hedge's own hold */
const HOLD = 1_000n;
/** shared by the four workloads: about a third of the rounds' worst case, so refusals happen */
const TEAM_BUDGET = 600_000n;

type Limits = ExtraAttemptInput['limits'];
const LIMITS: Limits = {
  maxAttempts: 2,
  maxHedges: 1,
  maxRetries: 0,
  maxExtraSpendMicrousd: 5_000n,
  spendFloorMicrousd: 0n,
  minUsefulRemainingMs: 100,
};

describe('the primary answer races the hedge admission (1,000 rounds, shared team budget)', () => {
  const db = new Database(url, { poolMax: 32 });
  /** the samples' own connections, so they neither wait for nor starve the rounds */
  const samplerDb = new Database(url, { poolMax: 4 });
  const outbox = new OutboxRepository(db);
  const admission = new AdmissionRepository(db, outbox);
  const dispatch = new DispatchRepository(db, outbox);
  const settle = settleOnPostgres(db, outbox);
  const route = uniqueRoute('route-hedge-race');
  const { routeId, priceId } = route;
  const team = `team-hedge-race-${randomUUID()}`;
  const workloads: Array<{ id: string; limits: Limits; allowance?: ExtraAttemptInput['allowance'] }> = [
    { id: `wl-race-a-${randomUUID()}`, limits: LIMITS },
    // refuses hedges once the team's headroom after the hedge would fall below a sixth of its budget
    { id: `wl-race-b-${randomUUID()}`, limits: { ...LIMITS, spendFloorMicrousd: TEAM_BUDGET / 6n } },
    // an extra-spend allowance below one hedge's hold: never hedges
    { id: `wl-race-c-${randomUUID()}`, limits: { ...LIMITS, maxExtraSpendMicrousd: HOLD - 1n } },
    // hedges funded by an experiment allowance of 12 holds a month, not by its workload budget (30 was
    // sometimes never spent: the shared team budget refused the workload first, failing the tally)
    ((id) => ({
      id,
      limits: LIMITS,
      allowance: allowanceFundingOf(
        { workloadId: id, routeId: null, experimentAllowance: { budgetMicrousd: 12n * HOLD, period: 'month' } },
        new Date('2026-12-15T00:00:00Z'),
      ),
    }))(`wl-race-d-${randomUUID()}`),
  ];
  const allowance = workloads[3].allowance!;
  const allowanceAccount = budgetAccountId(EXPERIMENT_ALLOWANCE_SCOPE, allowance.scopeId, allowance.periodStart);
  const teamAccount = budgetAccountId('team', team, PERIOD);
  const accounts = [...workloads.map((w) => budgetAccountId('workload', w.id, PERIOD)), teamAccount, allowanceAccount];

  beforeAll(() => route.seed(db));
  afterAll(() => Promise.all([db.close(), samplerDb.close()]));

  type Round = { admitted: false } | { admitted: true; actionId: string; hedge: 'won' | 'lost' | ExtraAttemptDenial; loserUsage: boolean };

  /** One round up to both ends recorded; `verify` checks its money once `events` were settled. */
  async function round(i: number): Promise<{ result: Round; events: AttemptCompletedV1[]; verify: (o: SettleOutcome[]) => Promise<void> }> {
    const w = workloads[i % workloads.length];
    const input = admitInput(w.id, {
      reservation: { id: randomUUID(), reservedOutputTokens: 100, reservedMicrousd: HOLD, priceRevisionId: priceId },
      workloadBudget: { budgetMicrousd: 1_000_000n, periodStart: PERIOD },
      scopeBudgets: [{ scope: 'team', scopeId: team, budgetMicrousd: TEAM_BUDGET, periodStart: PERIOD }],
    });
    input.action.routeId = routeId;
    const actionId = input.action.id;
    const admitted = (await admission.admit(input)).ok;
    await step();
    if (!admitted) return { result: { admitted: false }, events: [], verify: async () => undefined };
    const primary = randomUUID();
    expect(await dispatch.claim({ ...primaryClaim(actionId, primary), routeId })).toEqual({ ok: true });

    const hedge = randomUUID();
    const now = new Date();
    const primaryAnswers = () => dispatch.chooseWinner({ actionId, attemptId: primary, now });
    const admitHedge = () =>
      dispatch.admitExtraAttempt({
        actionId,
        attemptId: hedge,
        attemptNo: 2,
        role: 'hedge',
        routeId,
        routeVersion: 1,
        effectiveCandidates: 1,
        holdMicrousd: HOLD,
        policyRevisionId: `rev-${w.id}`,
        priceRevisionId: priceId,
        limits: w.limits,
        claimedBy: `d-${i % 3}`,
        now,
        allowance: w.allowance ?? null,
      });
    const hedgeAnswers = () => dispatch.chooseWinner({ actionId, attemptId: hedge, now });
    const hedgeRuns = async () => {
      const admitted = await admitHedge();
      return admitted.ok ? { admitted, won: await hedgeAnswers() } : { admitted, won: null };
    };
    // Three rounds in four race freely; the fourth plays one interleaving by script (in turn: the
    // hedge answers first, the primary answers after the hedge was admitted, the primary answers
    // before the timer), so each way the race can end is exercised whatever the machine's timing.
    const scripted = Math.floor(i / workloads.length) % 4 === 3 ? Math.floor(i / 16) % 3 : null;
    let p: Awaited<ReturnType<typeof primaryAnswers>>;
    let h: Awaited<ReturnType<typeof hedgeRuns>>;
    if (scripted === null) {
      [p, h] = await Promise.all([primaryAnswers(), hedgeRuns()]);
    } else if (scripted === 0) {
      h = await hedgeRuns();
      p = await primaryAnswers();
    } else if (scripted === 1) {
      const admitted = await admitHedge();
      p = await primaryAnswers();
      h = admitted.ok ? { admitted, won: await hedgeAnswers() } : { admitted, won: null };
    } else {
      p = await primaryAnswers();
      h = await hedgeRuns();
    }

    await step();
    // exactly one winner, and both callers agree on it
    const winners = [p.won, h.won?.won ?? false].filter(Boolean);
    expect(winners).toHaveLength(1);
    const winner = p.won ? primary : hedge;
    expect(p.winnerAttemptId).toBe(winner);
    if (h.won) expect(h.won.winnerAttemptId).toBe(winner);

    const [reservation, rows, claims] = await Promise.all([
      db.prisma.reservation.findUniqueOrThrow({ where: { actionId } }),
      db.prisma.attempt.findMany({ where: { actionId }, orderBy: { attemptNo: 'asc' } }),
      db.prisma.dispatchClaim.count({ where: { actionId } }),
    ]);
    expect(claims).toBe(rows.length);
    if (!h.admitted.ok) {
      // never claimed: no attempt row, no claim, no hold added
      expect(rows.map((r) => r.id)).toEqual([primary]);
      expect(reservation.reservedMicrousd).toBe(HOLD);
    } else {
      expect(rows.map((r) => [r.id, r.role, r.holdMicrousd])).toEqual([
        [primary, 'primary', HOLD],
        [hedge, 'hedge', HOLD],
      ]);
      expect(reservation.reservedMicrousd).toBe(2n * HOLD);
    }

    // dispatch records both ends (the loser cancelled)
    const hedged = h.admitted.ok;
    const loserUsage = i % 3 !== 0;
    const ctx = { workloadId: w.id, actionId, routeId, attemptsTotal: hedged ? 2 : 1 };
    const ends = [end(ctx, winner, winner === primary ? 1 : 2, 'winner', true)];
    if (hedged) {
      const loser = winner === primary ? hedge : primary;
      ends.push(end(ctx, loser, loser === primary ? 1 : 2, 'loser', loserUsage));
    }
    // the loser's event first in every other round: settlement sees both orders
    if (i % 2 === 1) ends.reverse();
    await Promise.all(ends.map((e) => dispatch.complete(e.outcome)));
    await step();

    // settled with its group (below); then each round checks its own money
    const verify = async (outcomes: SettleOutcome[]) => {
      expect(outcomes).toEqual(ends.map((e) => (e.outcome.event.input_tokens === null ? 'reconciliation_required' : 'settled')));
      const [ledger, after, cases] = await Promise.all([
        db.prisma.ledgerEntry.findMany({ where: { actionId } }),
        db.prisma.reservation.findUniqueOrThrow({ where: { actionId } }),
        db.prisma.reconciliationCase.findMany({ where: { actionId } }),
      ]);
      // one ledger row per attempt with usage (the loser's too), carrying winner and attempt count
      expect(ledger.map((l) => [l.attemptId, l.winner, l.attemptsTotal]).sort()).toEqual(
        ends
          .filter((e) => e.outcome.event.input_tokens !== null)
          .map((e) => [e.outcome.attemptId, e.winner, ctx.attemptsTotal])
          .sort(),
      );
      const settled = ledger.reduce((sum, l) => sum + l.costMicrousd, 0n);
      const missing = hedged && !loserUsage;
      // the loser without usage holds exactly its own hold as unresolved; everything else settled or released
      expect({
        settled: after.settledMicrousd,
        unresolved: after.unresolvedMicrousd,
        released: after.releasedMicrousd,
        status: after.status,
      }).toEqual({
        settled,
        unresolved: missing ? HOLD : 0n,
        released: after.reservedMicrousd - settled - (missing ? HOLD : 0n),
        status: missing ? 'unresolved' : 'settled',
      });
      expect(cases.map((c) => [c.reason, c.exposureMicrousd])).toEqual(missing ? [['usage_missing', HOLD]] : []);
    };
    return {
      result: { admitted: true, actionId, hedge: hedged ? (winner === hedge ? 'won' : 'lost') : h.admitted.reason, loserUsage },
      events: ends.map((e) => e.outcome.event),
      verify,
    };
  }

  function end(
    ctx: { workloadId: string; actionId: string; routeId: string; attemptsTotal: number },
    attemptId: string,
    attemptNo: number,
    side: 'winner' | 'loser',
    withUsage: boolean,
  ): { outcome: AttemptOutcome; winner: boolean } {
    const now = new Date();
    const won = side === 'winner';
    const usage = won ? { input: 100, output: 50 } : { input: 40, output: 20 };
    const event: AttemptCompletedV1 = answeredAttemptEvent(
      { ...ctx, attemptId },
      {
        attempt_no: attemptNo,
        attempt_role: attemptNo === 1 ? 'primary' : 'hedge',
        outcome: won ? 'succeeded' : 'cancelled',
        http_status: won ? 200 : null,
        input_tokens: withUsage ? usage.input : null,
        output_tokens_total: withUsage ? usage.output : null,
        total_tokens: withUsage ? usage.input + usage.output : null,
        cached_input_tokens: withUsage ? 0 : null,
        reasoning_tokens: withUsage ? 0 : null,
        usage_source: withUsage ? 'provider_response' : null,
        candidates: won ? [{ index: 0, finish_reason: 'stop', outcome: 'ok' }] : [],
        returned_candidate_count: won ? 1 : 0,
        attempts_total: ctx.attemptsTotal,
        action_final: true,
        winner: won,
        deadline_outcome: won ? 'on_time' : 'cancelled',
        policy_revision_id: null,
      },
    );
    return {
      winner: won,
      outcome: {
        attemptId,
        actionId: ctx.actionId,
        status: won ? 'succeeded' : 'cancelled',
        statusReason: won ? 'answered' : 'cancelled: the other attempt won',
        providerRequestId: event.provider_request_id,
        httpStatus: event.http_status,
        returnedCandidates: event.returned_candidate_count,
        candidateOutcomes: event.candidates,
        promptBlockReason: null,
        usage: withUsage ? { inputTokens: usage.input, cachedInputTokens: 0, outputTokensTotal: usage.output, reasoningTokens: 0 } : null,
        usageSource: withUsage ? 'provider_response' : null,
        now,
        event,
        delivery: won
          ? { outcome: 'answered', verdict: 'valid', verdictReason: 'ok' }
          : { outcome: 'failed', verdict: null, verdictReason: null },
        finishAction: won ? { status: 'answered', reason: 'answered', returnedCandidates: 1, workloadId: ctx.workloadId } : null,
      },
    };
  }

  let samples = 0;
  /** After every step of every round (admission, the race, completion, settlement): every account sampled. */
  async function step(): Promise<void> {
    samples += await sample();
  }

  /** pending + unresolved + settled <= budget on every account */
  async function sample(): Promise<number> {
    // one prepared statement, the money compared in Postgres (bigint): a sample is cheap enough to take at every step
    const rows = await samplerDb.query<{ id: string; negative: boolean; over: boolean }>(
      {
        name: 'hedge_race_sample',
        text: `SELECT id, LEAST(pending_microusd, unresolved_microusd, settled_microusd) < 0 AS negative,
                 pending_microusd + unresolved_microusd + settled_microusd > budget_microusd AS over
               FROM budget_account WHERE id = ANY($1::text[])`,
      },
      [accounts],
    );
    for (const a of rows) expect(a).toEqual({ id: a.id, negative: false, over: false });
    return rows.length;
  }

  it('exactly one winner per action; the hedge claimed-and-settled or never claimed; no budget ever exceeded', async () => {
    const results: Round[] = [];
    for (let g = 0; g < ROUNDS; g += GROUP) {
      const played = await Promise.all(Array.from({ length: Math.min(GROUP, ROUNDS - g) }, (_, k) => round(g + k)));
      // settlement as its consumer runs it: batches of a few rounds' events (both ends of an action in
      // one batch, as one partition delivers them), the batches racing each other
      const withEvents = played.filter((p) => p.events.length > 0);
      const batches = Array.from({ length: Math.ceil(withEvents.length / SETTLE_ROUNDS) }, (_, b) =>
        withEvents.slice(b * SETTLE_ROUNDS, (b + 1) * SETTLE_ROUNDS),
      );
      await Promise.all(
        batches.map(async (batch) => {
          const outcomes = await settle.executeBatch(
            batch.flatMap((p) => p.events),
            new Date(),
          );
          await step();
          let at = 0;
          for (const p of batch) {
            await p.verify(outcomes.slice(at, at + p.events.length));
            at += p.events.length;
          }
        }),
      );
      results.push(...played.map((p) => p.result));
    }

    const count = (pick: (r: Round) => boolean) => results.filter(pick).length;
    const tally = new Map<string, number>();
    for (const r of results) tally.set(r.admitted ? r.hedge : 'not_admitted', (tally.get(r.admitted ? r.hedge : 'not_admitted') ?? 0) + 1);
    // each way the race ends happened (the scripted rounds make sure), and each workload's own limit refused hedges
    for (const k of ['won', 'lost', 'winner_chosen', 'spend_allowance_spent', 'spend_floor', 'experiment_allowance_spent'])
      expect({ k, seen: (tally.get(k) ?? 0) > 0 }).toEqual({ k, seen: true });
    // the shared team budget binds: later admissions are refused, and many were admitted before
    expect(tally.get('not_admitted') ?? 0).toBeGreaterThan(0);
    expect(count((r) => r.admitted)).toBeGreaterThan(ROUNDS / 3);
    expect(samples).toBeGreaterThan(0);

    // every account equals the sum of what its attempts settled and hold unresolved; nothing is left
    // pending. An attempt's money is on the accounts its hold sits on: an allowance-funded hedge's on
    // the allowance and the team, every other attempt's on its reservation's accounts.
    const admittedIds = results.flatMap((r) => (r.admitted ? [r.actionId] : []));
    const [reservations, attempts, ledger, cases] = await Promise.all([
      db.prisma.reservation.findMany({ where: { actionId: { in: admittedIds } } }),
      db.prisma.attempt.findMany({ where: { actionId: { in: admittedIds } } }),
      db.prisma.ledgerEntry.findMany({ where: { actionId: { in: admittedIds } } }),
      db.prisma.reconciliationCase.findMany({ where: { actionId: { in: admittedIds }, status: 'open' } }),
    ]);
    const reservationOf = new Map(reservations.map((r) => [r.actionId, r]));
    const fundingOf = new Map(
      attempts.map((t) => {
        const r = reservationOf.get(t.actionId)!;
        return [t.id, t.fundingAccountIds.length > 0 ? t.fundingAccountIds : [r.workloadAccountId, ...r.scopeAccountIds]];
      }),
    );
    expect(attempts.filter((t) => t.fundingAccountIds.includes(allowanceAccount)).length).toBeGreaterThan(0);
    for (const id of accounts) {
      const a = await db.prisma.budgetAccount.findUniqueOrThrow({ where: { id } });
      const on = (attemptId: string | null) => attemptId !== null && fundingOf.get(attemptId)!.includes(id);
      expect({ id, pending: a.pendingMicrousd, settled: a.settledMicrousd, unresolved: a.unresolvedMicrousd }).toEqual({
        id,
        pending: 0n,
        settled: ledger.filter((l) => on(l.attemptId)).reduce((x, l) => x + l.costMicrousd, 0n),
        unresolved: cases.filter((c) => on(c.attemptId)).reduce((x, c) => x + c.exposureMicrousd, 0n),
      });
    }
    console.log(
      `hedge race: ${ROUNDS} rounds, ${samples} account samples, outcomes ${JSON.stringify(Object.fromEntries(tally))}, deadlock retries ${db.retries.deadlock}`,
    );
  }, 300_000);
});
