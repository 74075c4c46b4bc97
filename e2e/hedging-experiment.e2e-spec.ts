import { DEFAULT_PRICES } from '@gateway/testing';
import { onTimeProbability } from '../apps/provider-sim/src/latency';
import { DEFAULT_WORDS } from '../apps/provider-sim/src/simulate';
import { estimatePromptTokens } from '../apps/provider-sim/src/text';
import { apiReport, closeTheDay, drive, experimentOn as experimentOnSim, moneyDecided } from './experiment-run';
import { stack, uid, withSeeder } from './support';

/**
 * Issue 11 through the running stack with the official `openai` SDK: a seeded experiment on a
 * heavy-tailed provider-sim route, whose true on-time rates follow from the sim's parameters
 * (`onTimeProbability`): the holdout answers on time when its one draw is fast; the hedged cohort
 * when the primary's draw is fast or, the primary being slow, the hedge (sent 1 s later) is.
 * The report's interval of the rate difference must cover the true difference. The day is then
 * reconciled (the sim's export imported: every aborted loser paid for as the provider bills it)
 * and the plan tolerates no unresolved exposure, so the verdict is pending before and established
 * after; the interval of the incremental cost per additional on-time answer must meet its truth,
 * bounded from the sim's parameters (below). On the same route without a tail hedging cannot help
 * and the verdict is not established.
 *
 * The cost truth. A 1 s hedge delay is far above a fast answer (10–50 ms) plus the stack's own
 * time inside dispatch, so the hedge fires exactly when the primary drew the tail (p = 0.3; the
 * run checks the share it measured). Every action pays one whole answer (prompt + DEFAULT_WORDS
 * output tokens at the seeded prices) and the per-attempt overhead; a fired hedge adds one more
 * attempt's overhead, its prompt, and the output the provider generated for the loser before its
 * abort (the sim's would-bill rule: between none and the whole answer). So the incremental cost
 * per additional on-time answer lies in [0.3·(overhead + prompt) / 0.21,
 * 0.3·(overhead + prompt + answer output) / 0.21], and the holdout's cost per action is one answer
 * plus one overhead.
 *
 * Size: E2E_EXPERIMENT_ACTIONS actions (default 3,000, as the issue asks: about 2 minutes at 48
 * concurrent clients on a loaded 2-core box, where the stack itself adds ~0.8 s to a fast answer;
 * the useful deadline (2.5 s) sits between that and the tail (4–5 s) so the truth does not hinge
 * on the box's speed). The intervals are 95 %: a run may miss by design (the sim's draws follow
 * arrival order, which concurrency varies); the bootstrap seed is fixed.
 */
const ACTIONS = Number(process.env.E2E_EXPERIMENT_ACTIONS ?? 3_000);
const NO_TAIL_ACTIONS = 400;
const CONCURRENCY = 48;
const USEFUL_DEADLINE_MS = 2_500;
const HEDGE_DELAY_MS = 1_000;
const TAIL_SHARE = 0.3;
const TAIL = 'latency=10-50;latency-tail=300:4000-5000';
const NO_TAIL = 'latency=10-50';

describe('the hedging experiment through the stack (issue 11)', () => {
  const run = uid();
  let operator: string;

  jest.setTimeout(240_000);

  beforeAll(async () => {
    operator = await withSeeder((seed) => seed.operator(`xops-${run}`, ['operator']));
  });

  const simModel = (name: string) => `sim-x${name}-${run}`;
  const experimentOn = (name: string, script: string, plan?: { min_actions_per_cohort: number; max_unresolved_share_bps: number }) =>
    experimentOnSim({
      name: `${name}-${run}`,
      upstreamModel: `${simModel(name)};${script}`,
      hedgeDelayMs: HEDGE_DELAY_MS,
      usefulDeadlineMs: USEFUL_DEADLINE_MS,
      plan,
    });

  // the no-tail run has no losers to reconcile; the heavy-tail run reconciles its day (closeTheDay)
  async function reportOf(experimentId: string, n: number): Promise<Record<string, any>> {
    await moneyDecided(experimentId, n);
    return apiReport(experimentId, operator);
  }

  it(`heavy tail: pending until the losers are reconciled; then the intervals meet the truths and hedging is established (${ACTIONS} actions)`, async () => {
    const tail = await experimentOn('tail', TAIL, { min_actions_per_cohort: 100, max_unresolved_share_bps: 0 });
    const { experimentId } = tail;
    await drive(tail, ACTIONS, CONCURRENCY, run);
    // the aborted losers' usage is not known yet: their exposure is unresolved, no verdict
    const before = await reportOf(experimentId, ACTIONS);
    expect(before.unresolved_share_bps).toBeGreaterThan(0);
    expect(before.verdict).toBe('pending');
    const day = await closeTheDay({ experimentId, workloadId: tail.workloadId, simModel: simModel('tail'), operator });
    const report = await apiReport(experimentId, operator);
    expect(report.unresolved_share_bps).toBe(0);
    console.info(`${day.attempts} attempts reconciled: ${day.lines} export lines, ${day.released.length} cases released at 0`);

    const holdoutTruth = onTimeProbability(TAIL, USEFUL_DEADLINE_MS);
    const hedgedTruth = holdoutTruth + (1 - holdoutTruth) * onTimeProbability(TAIL, USEFUL_DEADLINE_MS - HEDGE_DELAY_MS);
    const truth = hedgedTruth - holdoutTruth;
    expect(holdoutTruth).toBeCloseTo(0.7, 12);
    expect(truth).toBeCloseTo(0.21, 12);

    const { hedged, holdout } = report.cohorts;
    expect(hedged.eligible_actions + holdout.eligible_actions).toBe(ACTIONS);
    expect(report.ineligible_actions).toBe(0);
    const [low, high] = report.on_time_rate_difference.interval_95 as [number, number];
    // The sim's closed form is the provider's truth; end to end, the stack's own queueing on a
    // loaded 2-core box moves the measured rates a little (runs so far: the interval covered the
    // truth, or missed it by up to 0.014 — docs/decisions.md, "The experiment wired end to end").
    // A 95 % interval also misses 1 run in 20 by design. So: covered within STACK_MARGIN.
    const STACK_MARGIN = 0.03;
    console.info(`rate difference ${report.on_time_rate_difference.estimate} [${low}, ${high}], truth ${truth}`);
    expect(low).toBeLessThanOrEqual(truth + STACK_MARGIN);
    expect(high).toBeGreaterThanOrEqual(truth - STACK_MARGIN);
    expect(report.bootstrap).toMatchObject({ resamples: 2000, seed: 11 });
    // the truth: a positive improvement at an incremental cost far below the 1 USD premium
    expect(report.verdict).toBe('established');
    // the hedged cohort paid for extra attempts: more per action than the holdout
    expect(BigInt(hedged.cost_per_action_microusd)).toBeGreaterThan(BigInt(holdout.cost_per_action_microusd));

    // the cost truth (see the top): the premise first — hedges fired for the tail's share of actions
    const fired = await withSeeder(async (_seed, db) => {
      const rows = await db.prisma.$queryRaw<Array<{ actions: number; hedged: number }>>`
        SELECT count(DISTINCT a.id)::int AS actions, count(DISTINCT t.action_id) FILTER (WHERE t.role = 'hedge')::int AS hedged
        FROM action a JOIN attempt t ON t.action_id = a.id WHERE a.experiment_id = ${experimentId} AND a.cohort = 'hedged'`;
      return rows[0].hedged / rows[0].actions;
    });
    const micro = (tokens: number, perMTok: bigint) => (tokens * Number(perMTok)) / 1e6;
    const prompts = Array.from({ length: ACTIONS }, (_, i) => estimatePromptTokens([`question ${i} ${run}`.length]));
    const prompt = {
      low: micro(Math.min(...prompts), DEFAULT_PRICES.inputPerMTokMicrousd),
      high: micro(Math.max(...prompts), DEFAULT_PRICES.inputPerMTokMicrousd),
    };
    const output = micro(DEFAULT_WORDS, DEFAULT_PRICES.outputPerMTokMicrousd);
    const overhead = Number(report.overhead_microusd_per_attempt);
    const ROUNDING = 2; // µUSD per attempt: each priced category rounds to a whole micro-dollar
    const icerTruth = {
      low: (TAIL_SHARE * (overhead + prompt.low - ROUNDING)) / truth,
      high: (TAIL_SHARE * (overhead + prompt.high + output + ROUNDING)) / truth,
    };
    const icer = report.incremental_cost_per_on_time_answer_microusd.interval_95.map(Number) as [number, number];
    console.info(
      `hedges fired for ${fired.toFixed(3)} of hedged actions (tail ${TAIL_SHARE}); incremental cost ${report.incremental_cost_per_on_time_answer_microusd.estimate} [${icer[0]}, ${icer[1]}] µUSD per additional on-time answer, truth within [${icerTruth.low.toFixed(1)}, ${icerTruth.high.toFixed(1)}]; holdout ${holdout.cost_per_action_microusd} µUSD per action`,
    );
    expect(Math.abs(fired - TAIL_SHARE)).toBeLessThanOrEqual(0.04);
    // the interval meets the truth's range (an unreconciled loser or a missing overhead falls below it)
    expect(icer[0]).toBeLessThanOrEqual(icerTruth.high);
    expect(icer[1]).toBeGreaterThanOrEqual(icerTruth.low);
    // the holdout: one whole answer and one overhead per action (the per-action figure rounds up)
    const holdoutCost = Number(holdout.cost_per_action_microusd);
    expect(holdoutCost).toBeGreaterThanOrEqual(Math.floor(overhead + prompt.low + output - ROUNDING));
    expect(holdoutCost).toBeLessThanOrEqual(Math.ceil(overhead + prompt.high + output + ROUNDING));

    const csv = await fetch(`${stack.policy}/experiments/${experimentId}/report?format=csv`, {
      headers: { authorization: `Bearer ${operator}` },
    });
    expect(csv.headers.get('content-type')).toContain('text/csv');
    expect((await csv.text()).split('\n')[1]).toBe(
      `hedged,${hedged.eligible_actions},${hedged.on_time_valid_answers},${hedged.on_time_rate},${hedged.settled_microusd},${hedged.unresolved_exposure_microusd},${hedged.cost_per_action_microusd},${hedged.cost_per_on_time_answer_microusd}`,
    );

    // every attempt carries its action's cohort
    await withSeeder(async (_seed, db) => {
      const rows = await db.prisma.$queryRaw<Array<{ mismatched: number; hedges_in_holdout: number }>>`
        SELECT count(*) FILTER (WHERE t.cohort IS DISTINCT FROM a.cohort)::int AS mismatched,
               count(*) FILTER (WHERE a.cohort = 'holdout' AND t.role <> 'primary')::int AS hedges_in_holdout
        FROM attempt t JOIN action a ON a.id = t.action_id WHERE a.experiment_id = ${experimentId}`;
      expect(rows[0]).toEqual({ mismatched: 0, hedges_in_holdout: 0 });
    });
  });

  it(`no tail: hedging cannot help, the verdict is not established (${NO_TAIL_ACTIONS} actions)`, async () => {
    const flat = await experimentOn('flat', NO_TAIL);
    const { experimentId } = flat;
    await drive(flat, NO_TAIL_ACTIONS, CONCURRENCY, run);
    const report = await reportOf(experimentId, NO_TAIL_ACTIONS);
    expect(onTimeProbability(NO_TAIL, USEFUL_DEADLINE_MS)).toBe(1);
    const [low, high] = report.on_time_rate_difference.interval_95 as [number, number];
    expect(low).toBeLessThanOrEqual(0);
    expect(high).toBeGreaterThanOrEqual(0);
    expect(report.verdict).toBe('not_established');
  });

  it('an unknown experiment is a 404 and a bad format a 400', async () => {
    const h = { authorization: `Bearer ${operator}` };
    expect((await fetch(`${stack.policy}/experiments/nope-${run}/report`, { headers: h })).status).toBe(404);
    const { experimentId } = await experimentOn('fmt', NO_TAIL);
    const bad = await fetch(`${stack.policy}/experiments/${experimentId}/report?format=xml`, { headers: h });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as any).error).toMatchObject({ code: 'invalid_request', param: 'format' });
  });
});
