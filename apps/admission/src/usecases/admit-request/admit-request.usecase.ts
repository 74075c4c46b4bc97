import { Injectable } from '@nestjs/common';
import type { Logger } from 'pino';
import {
  AdmissionDecisionV1,
  ApiKind,
  DispatchCommandV1,
  DispatchControlV1,
  DispatchReplyV1,
  ProviderKind,
  RouteTarget,
} from '@gateway/contracts';
import {
  AdmissionRepository,
  AdmitInput,
  CatalogRepository,
  ActionWithdrawal,
  RouteContract,
  ScopeLimits,
  VoidOutcome,
  WorkloadPolicy,
} from '@gateway/db';
import { CatalogCache } from '../../catalog-cache';
import {
  actionMachine,
  ActionState,
  budgetPeriodStart,
  computeReservation,
  decideAdmission,
  DenialCode,
  deterministicSamplingParam,
  DomainError,
  estimateRequestInputTokens,
  fingerprint,
  fixedWindow,
  quotaScopeName,
  readWorkflowId,
  workflowIdHash,
  hashCredential,
  assignCohort,
  hedgeIneligibility,
  normaliseRequest,
  requestToolNames,
  featureUnpricedBy,
  pricedFeaturesUsed,
  pricedShapeOf,
  reservationOutOfRange,
  responsesRequestRefusal,
  tokenWindow,
  unpricedFeature,
} from '@gateway/domain';
import { ContentCipher, KafkaBus, publishDispatchCommand, ReplyRouter } from '@gateway/messaging';
import { InjectConfig, InjectLogger, ServiceConfig, UnauthenticatedReason } from '@gateway/service-kit';
import { AdmitRequestCommand } from './admit-request.command';
import { AdmissionMetrics } from '../../admission.metrics';
import { Clock, IdGenerator, InjectClock, InjectIds } from '@gateway/service-kit';

export interface AdmittedAction {
  actionId: string;
  headers: Record<string, string>;
  command: DispatchCommandV1;
  deadline: Date;
}

export const ADMISSION_DISPATCH_GRACE_MS = 2000;
const RETRY_AFTER_SECONDS = '1';

/**
 * Admission (DESIGN §3 step 2): authenticate, decide, reserve atomically, then publish the
 * encrypted dispatch command. Every outcome, allow or deny, emits one sanitised decision event.
 */
@Injectable()
export class AdmitRequest {
  constructor(
    private readonly catalog: CatalogCache,
    private readonly exceptionsSource: CatalogRepository,
    private readonly admissions: AdmissionRepository,
    private readonly withdrawals: ActionWithdrawal,
    private readonly bus: KafkaBus,
    private readonly replies: ReplyRouter,
    private readonly cipher: ContentCipher,
    private readonly metrics: AdmissionMetrics,
    @InjectConfig() private readonly config: ServiceConfig,
    @InjectLogger() private readonly log: Logger,
    @InjectClock() private readonly clock: Clock,
    @InjectIds() private readonly ids: IdGenerator,
  ) {}

  /**
   * `signal`: aborts when the client leaves. An admission still waiting for its reservation
   * statement is then dropped (rejected with the signal's reason, nothing reserved, no decision
   * event: nobody asked any more); one already reserving completes, and the caller withdraws it.
   */
  async execute(cmd: AdmitRequestCommand, opts: { signal?: AbortSignal } = {}): Promise<AdmittedAction> {
    const now = this.clock.now();
    const actionId = this.ids.next();
    const requestId = this.ids.next();
    const base = this.eventBase(cmd, actionId, requestId, now);

    const workload = cmd.credential ? await this.catalog.workloadByKeyHash(hashCredential(cmd.credential)) : null;
    if (!workload) throw this.unauthenticated(cmd.credential ? 'unknown_credential' : 'missing_credential');
    base.workload_id = workload.id;
    base.environment = workload.environment;

    // A workflow id is a counter key: hostile values are refused before anything else is read.
    const workflow = readWorkflowId({ header: cmd.workflowId ?? null, body: cmd.body, field: workload.workflowIdField });
    if (!workflow.ok) throw await this.deny(base, workload, workflow.code, workflow.message, workflow.param);
    const workflowHash = workflow.workflowId === null ? null : workflowIdHash(workflow.workflowId);
    base.workflow_id_hash = workflowHash;

    const route = workload.allowedAliases.includes(cmd.modelAlias) ? await this.catalog.routeByAlias(cmd.modelAlias) : null;
    if (!route || !dialectServes(cmd.apiKind, route.providerKind)) {
      throw await this.deny(
        base,
        workload,
        'unknown_route',
        `model alias '${cmd.modelAlias}' is not mapped for workload ${workload.id}`,
        'model',
      );
    }
    base.route_id = route.routeId;
    base.route_version = route.version;

    const fingerprintHex = fingerprint({ kind: cmd.apiKind, alias: cmd.modelAlias, stream: cmd.stream, body: cmd.body });
    if (cmd.idempotencyKey) {
      const prior = await this.admissions.findByIdempotencyKey(workload.id, cmd.idempotencyKey);
      if (prior) return this.replay(base, workload, prior, fingerprintHex);
    }

    // Every spelling of the candidate count and the cap, read against the contract's own names;
    // the body that travels on holds none of them (the adapter writes the reserved values).
    const shape = normaliseRequest(cmd.body, cmd.apiKind, { candidateParam: route.candidateParam, outputCapParam: route.outputCapParam });
    if (!shape.ok) throw await this.deny(base, workload, shape.code, shape.message, shape.param);
    base.requested_candidate_count = countAsSent(shape.requestedCandidates);
    this.metrics.observeRequested(workload.id, route.routeId, shape.requestedCandidates);
    if (cmd.apiKind === 'openai-responses') {
      const refusal = responsesRequestRefusal(shape.body, { allowProviderStorage: workload.allowProviderStorage });
      if (refusal) throw await this.deny(base, workload, refusal.code, refusal.message, refusal.param);
    }
    // A price-changing feature is admitted only when the route contract declares it AND the price
    // revision in force prices it (docs/decisions.md, "Priced by the contract and by the price").
    const family = cmd.apiKind === 'openai-responses' ? 'openai-responses' : route.providerKind;
    const used = pricedFeaturesUsed(shape.body, family);
    const undeclared = unpricedFeature(used, route.pricedFeatures);
    if (undeclared) {
      throw await this.deny(
        base,
        workload,
        'unpriced_feature',
        `${undeclared.param} asks for ${undeclared.feature}, which changes the provider's price and is not priced by route ${route.routeId}'s contract; remove it or ask an operator to price it`,
        undeclared.param,
      );
    }
    const estimate = estimateRequestInputTokens(shape.body, cmd.apiKind, route.mediaInputTokens);
    if (!estimate.ok) throw await this.deny(base, workload, estimate.code, estimate.message, estimate.param);
    const inputTokensEstimate = estimate.tokens;

    const price = await this.catalog.priceAt(route.routeId, now);
    if (!price) throw await this.deny(base, workload, 'route_contract_unverified', `route ${route.routeId} has no price revision in force`);
    const pricedShape = pricedShapeOf(shape.body, family, estimate.media);
    const unpriced = featureUnpricedBy(used, pricedShape, price);
    if (unpriced) {
      const what = unpriced.feature === 'service_tier' ? `service tier '${String(pricedShape.serviceTier)}'` : unpriced.feature;
      throw await this.deny(
        base,
        workload,
        'unpriced_feature',
        `${unpriced.param} asks for ${what}, which route ${route.routeId}'s contract allows but its price revision ${price.id} does not price; remove it or ask an operator to add its rates`,
        unpriced.param,
      );
    }
    const requested = shape.requestedCandidates;
    // Fallback contracts constrain multi-candidate requests (DESIGN §7); every request carries the
    // approved chain to dispatch, which tries it after a transient failure of the primary route.
    const fallbacks = await this.fallbackRoutes(workload, route);
    // Exceptions only matter above the workload default, or for several candidates without
    // sampling (only an exception allows that), and are always read fresh.
    const wantsMore = typeof requested === 'number' && requested > workload.defaultMaxCandidates;
    const deterministicSampling = deterministicSamplingParam(shape.body, cmd.apiKind);
    const unsampled = typeof requested === 'number' && requested > 1 && deterministicSampling !== null;
    const exceptions = wantsMore || unsampled ? await this.exceptionsSource.activeExceptions(workload.id, now) : [];
    const decision = decideAdmission({
      now,
      workload,
      route,
      fallbackRoutes: fallbacks,
      exceptions,
      requestedCandidates: requested,
      candidateParamName: shape.candidateParamName,
      requestedOutputCap: shape.requestedOutputCap,
      stream: cmd.stream,
      deterministicSampling,
      inputTokensEstimate,
      price,
      pricedShape,
    });
    base.approved_max_candidates = decision.ok ? decision.approvedMax : (decision.approvedMax ?? null);
    if (!decision.ok) throw await this.deny(base, workload, decision.code, decision.message, decision.param ?? undefined);
    base.effective_candidate_count = decision.effective;

    const deadline = new Date(now.getTime() + workload.deadlineMs);
    const window = tokenWindow(now);
    const dispatchDeadline = new Date(deadline.getTime() + ADMISSION_DISPATCH_GRACE_MS);
    const requestTokens = inputTokensEstimate + decision.reservedOutputTokens;
    const workflowWindow = fixedWindow(now, workload.workflowWindowSeconds);
    const scopes = this.scopeQuotas(
      await this.catalog.scopeLimitsFor(workload.team, workload.environment),
      now,
      requestTokens,
      workflowHash === null || workload.maxCallsPerWorkflow === null
        ? null
        : { scopeId: `${workload.id}/${workflowHash}`, windowStart: workflowWindow.windowStart, limit: workload.maxCallsPerWorkflow },
    );
    const appliedScope = [quotaScopeName('workload'), ...(decision.exception ? [quotaScopeName('exception')] : []), ...scopes.applied].join(
      ',',
    );
    base.quota_scope = appliedScope;
    const experiment = await this.experimentOf(workload.id, actionId, cmd, decision.effective, shape.body);
    const result = await this.admissions.admit(
      {
        now,
        action: {
          id: actionId,
          workloadId: workload.id,
          environment: workload.environment,
          routeId: route.routeId,
          routeVersion: route.version,
          modelAlias: cmd.modelAlias,
          apiKind: cmd.apiKind,
          streamMode: cmd.stream ? 'sse' : 'none',
          requestedCandidates: decision.requested,
          effectiveCandidates: decision.effective,
          outputCeiling: decision.outputCeiling,
          inputTokensEstimate,
          exceptionId: decision.exception?.id ?? null,
          idempotencyKey: cmd.idempotencyKey,
          requestFingerprint: fingerprintHex,
          deadlineAt: deadline,
          dispatchDeadlineAt: dispatchDeadline,
          experimentId: experiment?.id ?? null,
          cohort: experiment?.cohort ?? null,
        },
        reservation: {
          id: this.ids.next(),
          reservedOutputTokens: decision.reservedOutputTokens,
          reservedMicrousd: decision.reservedMicrousd,
          priceRevisionId: price.id,
        },
        workloadBudget: { budgetMicrousd: workload.budgetMicrousd, periodStart: budgetPeriodStart(workload.budgetPeriod, now) },
        exceptionBudget: decision.exception
          ? { exceptionId: decision.exception.id, budgetMicrousd: decision.exception.budgetMicrousd }
          : null,
        concurrency: { scope: 'workload', scopeId: workload.id, maxInFlight: workload.maxInFlight },
        tokenRate:
          workload.tokensPerMinute === null
            ? null
            : {
                scopeId: workload.id,
                windowStart: window.windowStart,
                tokens: requestTokens,
                limit: workload.tokensPerMinute,
              },
        workflowCalls: scopes.workflowCalls,
        scopeTokenRates: scopes.scopeTokenRates,
        scopeBudgets: scopes.scopeBudgets,
        quotaScope: appliedScope,
        workflowIdHash: workflowHash,
        decisionEvent: {
          ...base,
          policy_result: 'allow',
          policy_reason: decision.exception ? 'within_exception' : 'within_policy',
          reserved_microusd: decision.reservedMicrousd.toString(),
          exception_id: decision.exception?.id ?? null,
        },
      },
      { signal: opts.signal },
    );
    if (!result.ok) {
      switch (result.code) {
        case 'budget_exhausted':
          base.quota_scope = result.quotaScope;
          throw await this.deny(
            base,
            workload,
            'budget_exhausted',
            `reserving ${decision.reservedMicrousd} micro-USD would exceed the ${result.quotaScope} budget (${result.remainingMicrousd} micro-USD left); lower max_tokens or the candidate count, or ask for a larger budget`,
          );
        case 'token_quota_exceeded':
          base.quota_scope = result.quotaScope;
          throw await this.deny(
            base,
            workload,
            'token_quota_exceeded',
            `${result.quotaScope === 'workload' ? `workload ${workload.id}` : `scope ${result.quotaScope}`} would exceed its ${result.limit} tokens per minute (this request reserves ${requestTokens}); retry after ${window.retryAfterSeconds}s or lower max_tokens`,
            undefined,
            { 'retry-after': String(window.retryAfterSeconds) },
          );
        case 'fanout_limit_exceeded':
          base.quota_scope = quotaScopeName('workflow');
          throw await this.deny(
            base,
            workload,
            'fanout_limit_exceeded',
            `workload ${workload.id} allows ${result.limit} calls per workflow id per ${workload.workflowWindowSeconds}s, and this workflow has used them; retry after ${workflowWindow.retryAfterSeconds}s`,
            undefined,
            { 'retry-after': String(workflowWindow.retryAfterSeconds) },
          );
        case 'concurrency_limit_exceeded':
          throw await this.deny(
            base,
            workload,
            'concurrency_limit_exceeded',
            `workload ${workload.id} already has ${result.inFlight} requests in flight`,
            undefined,
            { 'retry-after': RETRY_AFTER_SECONDS },
          );
        case 'idempotency_conflict': {
          const prior = cmd.idempotencyKey ? await this.admissions.findByIdempotencyKey(workload.id, cmd.idempotencyKey) : null;
          if (prior) return this.replay(base, workload, prior, fingerprintHex);
          throw await this.deny(base, workload, 'idempotency_key_reused', 'Idempotency-Key conflict; retry the request');
        }
      }
    }
    this.metrics.decisions.inc({ result: 'allow', code: 'ok' });

    const command: DispatchCommandV1 = {
      action_id: actionId,
      request_id: requestId,
      workload_id: workload.id,
      environment: workload.environment,
      api_kind: cmd.apiKind,
      stream: cmd.stream,
      route: routeTarget(route, cmd.modelAlias, price.id),
      requested_candidates: decision.requested,
      effective_candidates: decision.effective,
      output_ceiling: decision.outputCeiling,
      include_usage_for_client: cmd.includeUsageForClient,
      allow_provider_storage: workload.allowProviderStorage,
      deadline: deadline.toISOString(),
      dispatch_deadline: dispatchDeadline.toISOString(),
      hold_microusd: decision.reservedMicrousd.toString(),
      fallbacks: await this.fallbackTargets(
        fallbacks.filter((f) => decision.fallbackRouteIds.includes(f.routeId)),
        { apiKind: cmd.apiKind, body: shape.body, effective: decision.effective, outputCeiling: decision.outputCeiling, now },
      ),
      acceptance: { allow_length: workload.allowLength, allow_content_filter: workload.allowContentFilter },
      ...(experiment ? { experiment } : {}),
      request: shape.body,
    };
    return {
      actionId,
      deadline,
      command,
      headers: {
        'x-gateway-action-id': actionId,
        'x-gateway-requested-candidates': decision.requested === null ? 'omitted' : String(decision.requested),
        'x-gateway-effective-candidates': String(decision.effective),
        'x-gateway-reserved-microusd': decision.reservedMicrousd.toString(),
      },
    };
  }

  /**
   * Publishes the encrypted command after the reservation committed. Listening starts first so
   * even an instant reply is seen. A crash between commit and publish leaves a reservation whose
   * command can never be dispatched after its deadline; reconciliation voids it then.
   */
  async dispatch(admitted: AdmittedAction, onReply: (r: DispatchReplyV1) => void, onTimeout: () => void): Promise<() => void> {
    const stop = this.replies.listen(admitted.actionId, admitted.deadline, this.clock.now(), onReply, onTimeout);
    try {
      await this.publishCommand(admitted);
    } catch (err) {
      stop();
      throw err;
    }
    return stop;
  }

  /**
   * Tells every dispatch instance that this dispatched stream's client is gone, so the one
   * streaming it stops relaying its chunks (it still reads them for the usage). Best effort and
   * never awaited: a stop that is lost leaves the chunks to travel to nobody, as they did before.
   */
  stopRelay(actionId: string, reason: DispatchControlV1['reason']): void {
    const control: DispatchControlV1 = {
      event_id: this.ids.next(),
      action_id: actionId,
      kind: 'stop_relay',
      reason,
      timestamp: this.clock.now().toISOString(),
    };
    this.bus.publish('dispatchControls', [{ key: actionId, value: control }]).then(
      () => this.metrics.relayStops.inc({ reason, outcome: 'published' }),
      (err: Error) => {
        this.metrics.relayStops.inc({ reason, outcome: 'failed' });
        this.log.warn(
          { action_id: actionId, error: err.name },
          'stop for a gone stream client not published; its chunks are relayed to nobody',
        );
      },
    );
  }

  /**
   * Withdraws an admitted action whose answer admission will not wait for: its command could not
   * be confirmed sent (the publish failed), or its client was answered before the reservation
   * committed. Unless a dispatcher claimed it first, the reservation is voided, the in-flight slot
   * returned and the action expired now (libs/db `voidUndispatchedAction`, the sweeper's rule),
   * and a command that reached the topic after all is refused by dispatch's claim. Before this,
   * the slot and the hold stayed taken until the dispatch-deadline sweep, and a command whose
   * publish only seemed to fail still ran after the client had its error.
   */
  withdraw(admitted: Pick<AdmittedAction, 'actionId'>): Promise<VoidOutcome> {
    return this.withdrawals.withdraw(admitted.actionId, this.clock.now());
  }

  private async publishCommand(admitted: AdmittedAction): Promise<void> {
    await publishDispatchCommand(
      this.bus,
      this.cipher,
      admitted.command,
      { instanceId: this.config.instanceId, topic: 'dispatchReplies' },
      this.ids.next(),
    );
  }

  private async replay(
    base: AdmissionDecisionV1,
    workload: WorkloadPolicy,
    prior: { id: string; requestFingerprint: string; status: string; streamMode: string },
    fingerprintHex: string,
  ): Promise<never> {
    if (prior.requestFingerprint !== fingerprintHex) {
      throw await this.deny(
        base,
        workload,
        'idempotency_key_reused',
        'this Idempotency-Key was already used with a different request body',
      );
    }
    throw new IdempotentReplay(prior.id, !actionMachine.terminal(prior.status as ActionState), prior.streamMode !== 'none');
  }

  /**
   * The action's cohort in the workload's running experiment (issue 11), or null without one. A
   * request hedging could never apply to (streaming, several candidates, a tool the experiment's
   * policy does not list as read-only) is `ineligible` and excluded from both cohorts, so the
   * cohorts compare like with like; the rest are assigned by `assignCohort`, a pure hash.
   */
  private async experimentOf(
    workloadId: string,
    actionId: string,
    cmd: AdmitRequestCommand,
    effectiveCandidates: number,
    body: Record<string, unknown>,
  ): Promise<NonNullable<DispatchCommandV1['experiment']> | null> {
    const running = await this.catalog.runningExperiment(workloadId);
    if (!running) return null;
    const ineligible = hedgeIneligibility(
      { enabled: true, maxHedges: 1 },
      { stream: cmd.stream, effectiveCandidates, toolNames: requestToolNames(body, cmd.apiKind), readOnlyTools: running.readOnlyTools },
    );
    return {
      id: running.id,
      cohort: ineligible ? 'ineligible' : assignCohort(running.id, actionId, running.holdoutShareBps),
      policy_revision_id: running.hedgePolicyRevisionId,
    };
  }

  /**
   * The team's and the environment's limits as admission counts them, in lock order (team, then
   * environment), and the names of every scope the request is counted against. A token rate
   * enforced per instance is kept on this instance's own counter and named `instance:<id>/…`.
   */
  private scopeQuotas(
    limits: ScopeLimits,
    now: Date,
    tokens: number,
    workflowCalls: NonNullable<AdmitInput['workflowCalls']> | null,
  ): Required<Pick<AdmitInput, 'scopeTokenRates' | 'scopeBudgets' | 'workflowCalls'>> & { applied: string[] } {
    const applied: string[] = workflowCalls ? [quotaScopeName('workflow')] : [];
    const scopeTokenRates: AdmitInput['scopeTokenRates'] = [];
    const scopeBudgets: AdmitInput['scopeBudgets'] = [];
    for (const limit of [limits.team, limits.environment]) {
      if (!limit) continue;
      if (limit.tokensPerMinute !== null) {
        const instanceId = limit.tokenRateEnforcement === 'instance' ? this.config.instanceId : null;
        scopeTokenRates.push({
          scope: limit.scope,
          scopeId: limit.scopeId,
          instanceId,
          windowStart: tokenWindow(now).windowStart,
          tokens,
          limit: limit.tokensPerMinute,
        });
        applied.push(quotaScopeName(limit.scope, limit.scopeId, instanceId));
      }
      if (limit.budgetMicrousd !== null) {
        scopeBudgets.push({
          scope: limit.scope,
          scopeId: limit.scopeId,
          budgetMicrousd: limit.budgetMicrousd,
          periodStart: budgetPeriodStart(limit.budgetPeriod, now),
        });
        const name = quotaScopeName(limit.scope, limit.scopeId);
        if (!applied.includes(name)) applied.push(name);
      }
    }
    return { scopeTokenRates, scopeBudgets, workflowCalls, applied };
  }

  private async fallbackRoutes(workload: WorkloadPolicy, primary: RouteContract): Promise<RouteContract[]> {
    const out: RouteContract[] = [];
    for (const alias of workload.fallbackChain) {
      if (alias === primary.alias) continue;
      const r = await this.catalog.routeByAlias(alias);
      if (r) out.push(r);
    }
    return out;
  }

  /**
   * The fallback routes dispatch may use for this action, each with the hold a fallback attempt on it
   * takes: the same estimate as the primary's reservation (`computeReservation`: input estimate +
   * effective × ceiling under the route's semantics) at that route's own price. A route that cannot
   * serve the client's dialect, has no price in force, or cannot price or estimate what the request
   * uses is left out (it would be refused if it were the primary).
   */
  private async fallbackTargets(
    routes: RouteContract[],
    req: { apiKind: ApiKind; body: Record<string, unknown>; effective: number; outputCeiling: number; now: Date },
  ): Promise<NonNullable<DispatchCommandV1['fallbacks']>> {
    const out: NonNullable<DispatchCommandV1['fallbacks']> = [];
    for (const f of routes) {
      if (!dialectServes(req.apiKind, f.providerKind)) continue;
      const family = req.apiKind === 'openai-responses' ? 'openai-responses' : f.providerKind;
      const used = pricedFeaturesUsed(req.body, family);
      if (unpricedFeature(used, f.pricedFeatures)) continue;
      const price = await this.catalog.priceAt(f.routeId, req.now);
      if (!price) continue;
      const estimate = estimateRequestInputTokens(req.body, req.apiKind, f.mediaInputTokens);
      if (!estimate.ok) continue;
      const shape = pricedShapeOf(req.body, family, estimate.media);
      if (featureUnpricedBy(used, shape, price)) continue;
      const hold = computeReservation({
        inputTokensEstimate: estimate.tokens,
        effectiveCandidates: req.effective,
        perCandidateOutputCeiling: req.outputCeiling,
        semantics: f.outputCapSemantics ?? 'per_candidate',
        price,
        shape,
      });
      if (reservationOutOfRange({ inputTokensEstimate: estimate.tokens, ...hold }) !== null) continue;
      out.push({ route: routeTarget(f, f.alias, price.id), hold_microusd: hold.reservedMicrousd.toString() });
    }
    return out;
  }

  /**
   * A request nobody is accountable for writes nothing: no decision event, no row (a flood of
   * bad keys must not become a flood of rows). It is counted by reason, and the 401 it gets costs
   * its source address a token of the failed-authentication throttle (service-kit).
   */
  private unauthenticated(reason: Exclude<UnauthenticatedReason, 'rate_limited'>): DomainError {
    this.metrics.decisions.inc({ result: 'deny', code: 'unauthorized' });
    this.metrics.unauthenticated.inc({ reason });
    return new DomainError('unauthorized', 'missing, unknown or revoked workload key');
  }

  private async deny(
    base: AdmissionDecisionV1,
    workload: WorkloadPolicy,
    code: DenialCode,
    message: string,
    param?: string,
    headers: Record<string, string> = {},
  ): Promise<DomainError> {
    this.metrics.decisions.inc({ result: 'deny', code });
    await this.admissions.recordDenial(workload.id, {
      ...base,
      event_id: this.ids.next(),
      policy_result: 'deny',
      policy_reason: code,
    });
    this.log.info({ action_id: base.action_id, workload_id: workload.id, code }, 'admission denied');
    return new DomainError(code, message, param, { 'x-gateway-action-id': base.action_id, ...headers });
  }

  private eventBase(cmd: AdmitRequestCommand, actionId: string, requestId: string, now: Date): AdmissionDecisionV1 {
    return {
      event_id: this.ids.next(),
      timestamp: now.toISOString(),
      request_id: requestId,
      action_id: actionId,
      attempt_id: null,
      attempt_role: null,
      workload_id: null,
      environment: null,
      route_id: null,
      route_version: null,
      model_alias: cmd.modelAlias,
      provider_request_id: null,
      requested_candidate_count: countAsSent(cmd.requestedCandidates),
      effective_candidate_count: null,
      returned_candidate_count: null,
      input_tokens: null,
      output_tokens_total: null,
      total_tokens: null,
      stream_mode: cmd.stream ? 'sse' : 'none',
      usage_source: null,
      quota_scope: 'workload',
      policy_result: null,
      policy_reason: null,
      reserved_microusd: null,
      exception_id: null,
      approved_max_candidates: null,
      workflow_id_hash: null,
    };
  }
}

/**
 * Signals that an Idempotency-Key matched an earlier action with the same body: `running` while
 * that action has no final state, `streamed` when it was a stream (never replayed).
 */
export class IdempotentReplay extends Error {
  constructor(
    readonly actionId: string,
    readonly running: boolean,
    readonly streamed: boolean,
  ) {
    super('idempotent replay');
  }
}

/** As sent, when it is a valid count; null means omitted (or not a count at all). */
function countAsSent(requested: unknown): number | null {
  return typeof requested === 'number' && Number.isInteger(requested) ? requested : null;
}

/**
 * No cross-translation: Gemini requests go to Gemini routes, chat completions to OpenAI and
 * OpenAI-compatible routes, and the Responses API to OpenAI routes only (an aggregator's
 * chat-completions contract says nothing about a /responses endpoint).
 */
export function dialectServes(apiKind: ApiKind, provider: ProviderKind): boolean {
  switch (apiKind) {
    case 'gemini-generate':
      return provider === 'gemini-generate';
    case 'openai-chat':
      return provider !== 'gemini-generate';
    case 'openai-responses':
      return provider === 'openai-chat';
  }
}

function routeTarget(route: RouteContract, alias: string, priceRevisionId: string): RouteTarget {
  return {
    route_id: route.routeId,
    route_version: route.version,
    model_alias: alias,
    provider_kind: route.providerKind,
    base_url: route.upstreamBaseUrl,
    upstream_model: route.upstreamModel,
    credential_ref: route.credentialRef,
    candidate_param: route.candidateParam,
    output_cap_param: route.outputCapParam,
    output_cap_semantics: route.outputCapSemantics,
    price_revision_id: priceRevisionId,
    // the primary and its retries send the action id in it (dispatch; hedges never)
    idempotency_header: route.upstreamIdempotencyHeader,
  };
}
