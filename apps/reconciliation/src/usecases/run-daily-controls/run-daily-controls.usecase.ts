import { Inject, Injectable } from '@nestjs/common';
import { ControlAlertV1, controlThresholdsOf } from '@gateway/contracts';
import { AlertRow, ControlsRepository } from '@gateway/db';
import {
  addTallies,
  addUtcDays,
  assessWorkloadDay,
  ControlAlertFinding,
  controlThresholdProblems,
  ControlThresholds,
  DayTally,
  DEFAULT_CONTROL_THRESHOLDS,
  DomainError,
  EMPTY_TALLY,
  OutputStats,
  parseUtcDay,
  utcDayOf,
} from '@gateway/domain';
import { IdGenerator, InjectIds } from '@gateway/service-kit';

/** What the job reads, narrowed (fakes implement it). */
export type ControlsPorts = Pick<
  ControlsRepository,
  'tallies' | 'workloads' | 'outputPerRequest' | 'exceptionUsage' | 'recordAlerts' | 'effectiveCounts' | 'unresolvedExposure' | 'listAlerts'
>;

export const BASELINE_DAYS = 7;
const DAY_MS = 24 * 60 * 60 * 1000;

/**
 * A day argument: `YYYY-MM-DD`, today (UTC) at the latest; absent = yesterday. Today is a partial
 * day: an operator may run it to see what has been decided so far, and its alerts stand (a later
 * run adds what it finds since, never a second alert of a kind).
 */
export function controlsDay(day: unknown, now: Date): string {
  if (day === undefined || day === null || day === '') return addUtcDays(utcDayOf(now), -1);
  const parsed = typeof day === 'string' ? parseUtcDay(day) : null;
  if (!parsed) throw new DomainError('invalid_request', 'day: must be a UTC day YYYY-MM-DD', 'day');
  if (parsed.getTime() > now.getTime()) throw new DomainError('invalid_request', 'day: must not be in the future (UTC)', 'day');
  return day as string;
}

interface Assessed {
  day: string;
  findings: Array<{ workloadId: string; finding: ControlAlertFinding }>;
  tallies: Map<string, Map<string, DayTally>>;
  baselines: Map<string, Map<string, DayTally>>;
  output: Awaited<ReturnType<ControlsPorts['outputPerRequest']>>;
  exceptions: Awaited<ReturnType<ControlsPorts['exceptionUsage']>>;
  thresholds: Map<string, ControlThresholds>;
}

/**
 * The daily controls of one UTC day (issue 13): per workload × route, the requested-count
 * distribution against the trailing 7 days, output tokens per request against the ceiling,
 * exception budgets, refusal rate. `execute` records the alerts (one per workload × route × day
 * × kind, each with its `gateway.controls.alerts.v1` event, so a re-run adds none); `report`
 * answers the day's figures and its stored alerts.
 */
@Injectable()
export class RunDailyControls {
  constructor(
    @Inject(ControlsRepository) private readonly controls: ControlsPorts,
    @InjectIds() private readonly ids: IdGenerator,
  ) {}

  async execute(day: string, now: Date): Promise<{ day: string; findings: number; added: AlertRow[] }> {
    const a = await this.assess(day);
    const rows = a.findings.map(({ workloadId, finding }) =>
      alertRow(day, workloadId, finding, { alertId: this.ids.next(), eventId: this.ids.next() }, now),
    );
    const added = await this.controls.recordAlerts(rows);
    return { day, findings: rows.length, added };
  }

  async report(day: string, workloadId?: string) {
    const a = await this.assess(day, workloadId);
    const dayStart = parseUtcDay(day) as Date;
    const [effective, exposure, alerts] = await Promise.all([
      this.controls.effectiveCounts(day, workloadId),
      this.controls.unresolvedExposure(new Date(dayStart.getTime() + DAY_MS), workloadId),
      this.controls.listAlerts({ day, workloadId, limit: 1000 }),
    ]);
    const routes: unknown[] = [];
    // every workload × route with decisions or settled output on the day
    const pairs = new Map<string, [string, string]>();
    for (const [wid, byRoute] of a.tallies) for (const routeId of byRoute.keys()) pairs.set(JSON.stringify([wid, routeId]), [wid, routeId]);
    for (const o of a.output) pairs.set(JSON.stringify([o.workloadId, o.routeId]), [o.workloadId, o.routeId]);
    for (const [, [wid, routeId]] of [...pairs].sort(([x], [y]) => x.localeCompare(y))) {
      const t = a.tallies.get(wid)?.get(routeId) ?? EMPTY_TALLY;
      const out = a.output.find((o) => o.workloadId === wid && o.routeId === routeId);
      routes.push({
        workload_id: wid,
        route_id: routeId,
        requested_counts: t.requested,
        effective_counts: Object.fromEntries(
          effective.filter((e) => e.workloadId === wid && e.routeId === routeId).map((e) => [e.effective, e.n]),
        ),
        returned_candidates_total: out?.returnedTotal ?? null,
        admitted: t.admitted,
        refused: t.refused,
        refusals_by_code: t.refusals,
        baseline_requested_counts: a.baselines.get(wid)?.get(routeId)?.requested ?? {},
        output_tokens_per_request: out ? outputDto(out.stats) : null,
      });
    }
    return {
      day,
      baseline_days: BASELINE_DAYS,
      routes,
      exceptions: a.exceptions.map((e) => ({
        exception_id: e.exceptionId,
        workload_id: e.workloadId,
        route_id: e.routeId,
        budget_microusd: e.budgetMicrousd.toString(),
        spent_microusd: e.spentMicrousd.toString(),
        unused_microusd: (e.budgetMicrousd > e.spentMicrousd ? e.budgetMicrousd - e.spentMicrousd : 0n).toString(),
        days_to_expiry: Math.max(0, Math.ceil((e.expiresAt.getTime() - dayStart.getTime() - DAY_MS) / DAY_MS)),
      })),
      unresolved_exposure: exposure.map((x) => ({
        workload_id: x.workloadId,
        age: x.age,
        reservations: x.reservations,
        unresolved_microusd: x.unresolvedMicrousd.toString(),
      })),
      alerts: alerts.map(alertDto),
    };
  }

  private async assess(day: string, onlyWorkload?: string): Promise<Assessed> {
    const dayStart = parseUtcDay(day) as Date;
    const dayEnd = new Date(dayStart.getTime() + DAY_MS);
    const [byDay, output, exceptions] = await Promise.all([
      this.controls.tallies(addUtcDays(day, -BASELINE_DAYS), day, onlyWorkload),
      this.controls.outputPerRequest(day, onlyWorkload),
      this.controls.exceptionUsage(dayStart, onlyWorkload),
    ]);
    const tallies = byDay.get(day) ?? new Map<string, Map<string, DayTally>>();
    const baselines = new Map<string, Map<string, DayTally>>();
    for (const [d, byWorkload] of byDay) {
      if (d === day) continue;
      for (const [wid, byRoute] of byWorkload) {
        const acc = baselines.get(wid) ?? new Map<string, DayTally>();
        for (const [routeId, t] of byRoute) acc.set(routeId, addTallies(acc.get(routeId) ?? EMPTY_TALLY, t));
        baselines.set(wid, acc);
      }
    }
    const workloadIds = [
      ...new Set([...tallies.keys(), ...output.map((o) => o.workloadId), ...exceptions.map((e) => e.workloadId)]),
    ].sort();
    const stored = await this.controls.workloads(workloadIds);
    const thresholds = new Map<string, ControlThresholds>();
    const findings: Assessed['findings'] = [];
    for (const wid of workloadIds) {
      const w = stored.get(wid);
      if (!w) continue; // decisions of a workload since deleted: nothing to compare against
      const t = thresholdsOrDefault(w.thresholds);
      thresholds.set(wid, t);
      const outputs = new Map<string, OutputStats>(output.filter((o) => o.workloadId === wid).map((o) => [o.routeId, o.stats]));
      for (const finding of assessWorkloadDay(
        {
          thresholds: t,
          perCandidateOutputCeiling: w.perCandidateOutputCeiling,
          day: tallies.get(wid) ?? new Map(),
          baseline: baselines.get(wid) ?? new Map(),
          output: outputs,
          exceptions: exceptions.filter((e) => e.workloadId === wid),
        },
        dayEnd,
      ))
        findings.push({ workloadId: wid, finding });
    }
    return { day, findings, tallies, baselines, output, exceptions, thresholds };
  }
}

/** Stored thresholds, or the defaults where a stored document no longer validates (never a crash of the job). */
function thresholdsOrDefault(doc: unknown): ControlThresholds {
  if (doc === null || typeof doc !== 'object') return DEFAULT_CONTROL_THRESHOLDS;
  const t = controlThresholdsOf(doc, DEFAULT_CONTROL_THRESHOLDS);
  return controlThresholdProblems(t).length === 0 ? t : DEFAULT_CONTROL_THRESHOLDS;
}

function outputDto(s: OutputStats) {
  return { requests: s.requests, mean: Math.round(s.mean * 100) / 100, p50: s.p50, p95: s.p95 };
}

const round = (x: number) => Math.round(x * 10_000) / 10_000;

/** The alert's public event (sanitised: ids, counts, shares, codes). */
export function alertRow(
  day: string,
  workloadId: string,
  f: ControlAlertFinding,
  ids: { alertId: string; eventId: string },
  now: Date,
): AlertRow {
  const { alertId, eventId } = ids;
  const none = {
    day_total: null,
    baseline_total: null,
    distance: null,
    grew: null,
    p95_output_tokens: null,
    threshold_output_tokens: null,
    refusal_rate: null,
    baseline_refusal_rate: null,
    refusals_by_code: null,
    exceptions: null,
  };
  const head = {
    event_id: eventId,
    alert_id: alertId,
    timestamp: now.toISOString(),
    day,
    workload_id: workloadId,
    route_id: f.routeId,
    kind: f.kind,
  };
  let details: ControlAlertV1;
  switch (f.kind) {
    case 'count_shift':
      details = {
        ...head,
        ...none,
        day_total: f.dayTotal,
        baseline_total: f.baselineTotal,
        distance: round(f.distance),
        grew: f.grew.map((g) => ({ category: g.category, day_share: round(g.dayShare), baseline_share: round(g.baselineShare) })),
      };
      break;
    case 'output_per_request':
      details = {
        ...head,
        ...none,
        day_total: f.requests,
        p95_output_tokens: Math.round(f.p95),
        threshold_output_tokens: f.thresholdTokens,
      };
      break;
    case 'exception_budget':
      details = {
        ...head,
        ...none,
        exceptions: f.exceptions.map((e) => ({
          exception_id: e.exceptionId,
          share: round(e.share),
          spent_microusd: e.spentMicrousd.toString(),
          budget_microusd: e.budgetMicrousd.toString(),
          days_to_expiry: e.daysToExpiry,
        })),
      };
      break;
    case 'refusal_rate_jump':
      details = {
        ...head,
        ...none,
        day_total: f.dayTotal,
        refusal_rate: round(f.dayRate),
        baseline_refusal_rate: round(f.baselineRate),
        refusals_by_code: f.refusals,
      };
      break;
  }
  return { alertId, day, workloadId, routeId: f.routeId, kind: f.kind, details, createdAt: now };
}

export function alertDto(a: AlertRow) {
  const { event_id: _eventId, ...rest } = a.details;
  return { ...rest, created_at: a.createdAt.toISOString() };
}
