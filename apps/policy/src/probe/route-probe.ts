import { performance } from 'node:perf_hooks';
import { Inject, Injectable } from '@nestjs/common';
import type { AdmissionDecisionV1, DispatchCommandV1, DispatchReplyV1, ProviderKind } from '@gateway/contracts';
import { ActionWithdrawal, AdmissionRepository, CatalogRepository, PolicyRepository, type RouteContractVersionView } from '@gateway/db';
import {
  budgetPeriodStart,
  DomainError,
  fingerprint,
  OPERATIONS_WORKLOAD_ID,
  PROBE_CANDIDATES,
  PROBE_OUTPUT_CAP,
  probeReservation,
} from '@gateway/domain';
import { ContentCipher, KafkaBus, publishDispatchCommand, ReplyRouter } from '@gateway/messaging';
import { adapterFor } from '@gateway/providers';
import { Clock, CLOCK, IdGenerator, ID_GENERATOR, InjectConfig, ServiceConfig } from '@gateway/service-kit';
import { PolicyError } from '../policy.errors';

export { PROBE_CANDIDATES, PROBE_OUTPUT_CAP } from '@gateway/domain';

const PROBE_PROMPT = 'Reply with the single word: ok';
/** Dispatch refuses a command after its dispatch deadline; a probe queued behind traffic gets this long. */
const PROBE_DISPATCH_GRACE_MS = 2000;

export const PROBE_OPTIONS = Symbol('PROBE_OPTIONS');
export interface ProbeOptions {
  timeoutMs: number;
}

/** What came back from one probe call: counts, usage and status only, never content. */
export interface ProbeObservation {
  /** the probe's action; its attempt is in the ledger (attempt_role `probe`) once settled */
  action_id: string;
  attempt_id: string | null;
  reserved_microusd: string;
  requested_candidates: number;
  output_cap: number;
  http_status: number | null;
  provider_error: string | null;
  returned_candidates: number | null;
  usage_present: boolean;
  input_tokens: number | null;
  output_tokens_total: number | null;
  reasoning_tokens: number | null;
  provider_request_id: string | null;
  prompt_block_reason: string | null;
  duration_ms: number;
}

export interface ProbeTarget {
  routeId: string;
  alias: string;
  contract: RouteContractVersionView;
}

/**
 * Sends one tiny multi-candidate request to a route's upstream through dispatch, exactly as an
 * application's request goes (same adapter, same parameter names from the contract, same
 * credentials and upstream allowlist). A probe is spend: it is reserved against the operations
 * workload's budget before it is sent (refused when that budget cannot fund it), its attempt is
 * settled into the ledger with `attempt_role: probe`, and what lacks evidence goes to
 * reconciliation like any attempt. It is only run when an operator asks for it.
 */
@Injectable()
export class RouteProbe {
  constructor(
    @Inject(PROBE_OPTIONS) private readonly opts: ProbeOptions,
    @Inject(CatalogRepository) private readonly catalog: Pick<CatalogRepository, 'priceAt'>,
    @Inject(PolicyRepository) private readonly policy: Pick<PolicyRepository, 'workloadById'>,
    @Inject(AdmissionRepository) private readonly admissions: Pick<AdmissionRepository, 'admit'>,
    @Inject(ActionWithdrawal) private readonly withdrawals: Pick<ActionWithdrawal, 'withdraw'>,
    @Inject(KafkaBus) private readonly bus: Pick<KafkaBus, 'publish'>,
    @Inject(ReplyRouter) private readonly replies: ReplyRouter,
    @Inject(ContentCipher) private readonly cipher: ContentCipher,
    @InjectConfig() private readonly config: ServiceConfig,
    @Inject(CLOCK) private readonly clock: Clock,
    @Inject(ID_GENERATOR) private readonly ids: IdGenerator,
  ) {}

  async run(target: ProbeTarget): Promise<ProbeObservation> {
    const c = target.contract;
    const kind = c.providerKind as ProviderKind;
    const now = this.clock.now();
    const price = await this.catalog.priceAt(target.routeId, now);
    if (!price) {
      throw new PolicyError(
        'route_unpriced',
        `route ${target.routeId} has no price revision in force; a probe is billed like any call, so add a price revision first`,
      );
    }
    const ops = await this.policy.workloadById(OPERATIONS_WORKLOAD_ID);
    if (!ops) throw new Error(`the operations workload ${OPERATIONS_WORKLOAD_ID} is missing (its migration creates it)`);

    const apiKind = kind === 'gemini-generate' ? 'gemini-generate' : 'openai-chat';
    const request =
      apiKind === 'gemini-generate'
        ? { contents: [{ role: 'user', parts: [{ text: PROBE_PROMPT }] }] }
        : { model: target.alias, messages: [{ role: 'user', content: PROBE_PROMPT }] };
    const semantics = c.outputCapSemantics === 'per_candidate' || c.outputCapSemantics === 'shared' ? c.outputCapSemantics : null;
    const reservation = probeReservation(request, apiKind, semantics, price);
    const actionId = this.ids.next();
    const requestId = this.ids.next();
    const deadline = new Date(now.getTime() + this.opts.timeoutMs);
    const dispatchDeadline = new Date(deadline.getTime() + PROBE_DISPATCH_GRACE_MS);
    const decision: AdmissionDecisionV1 = {
      event_id: this.ids.next(),
      timestamp: now.toISOString(),
      request_id: requestId,
      action_id: actionId,
      attempt_id: null,
      attempt_role: 'probe',
      workload_id: ops.id,
      environment: ops.environment,
      route_id: target.routeId,
      route_version: c.version,
      model_alias: target.alias,
      provider_request_id: null,
      requested_candidate_count: PROBE_CANDIDATES,
      effective_candidate_count: PROBE_CANDIDATES,
      returned_candidate_count: null,
      input_tokens: null,
      output_tokens_total: null,
      total_tokens: null,
      stream_mode: 'none',
      usage_source: null,
      quota_scope: 'workload',
      policy_result: 'allow',
      policy_reason: 'route_probe',
      reserved_microusd: reservation.reservedMicrousd.toString(),
      exception_id: null,
    };
    const admitted = await this.admissions.admit({
      now,
      action: {
        id: actionId,
        workloadId: ops.id,
        environment: ops.environment,
        routeId: target.routeId,
        routeVersion: c.version,
        modelAlias: target.alias,
        apiKind,
        streamMode: 'none',
        requestedCandidates: PROBE_CANDIDATES,
        effectiveCandidates: PROBE_CANDIDATES,
        outputCeiling: PROBE_OUTPUT_CAP,
        inputTokensEstimate: reservation.inputTokensEstimate,
        exceptionId: null,
        idempotencyKey: null,
        requestFingerprint: fingerprint({ kind: apiKind, alias: target.alias, stream: false, body: request }),
        deadlineAt: deadline,
        dispatchDeadlineAt: dispatchDeadline,
      },
      reservation: {
        id: this.ids.next(),
        reservedOutputTokens: reservation.reservedOutputTokens,
        reservedMicrousd: reservation.reservedMicrousd,
        priceRevisionId: price.id,
      },
      workloadBudget: { budgetMicrousd: ops.budgetMicrousd, periodStart: budgetPeriodStart(ops.budgetPeriod, now) },
      exceptionBudget: null,
      concurrency: { scope: 'workload', scopeId: ops.id, maxInFlight: ops.maxInFlight },
      tokenRate: null,
      decisionEvent: decision,
    });
    if (!admitted.ok) {
      switch (admitted.code) {
        case 'budget_exhausted':
          throw new DomainError(
            'budget_exhausted',
            `the probe reserves ${reservation.reservedMicrousd} micro-USD and the operations budget (workload ${ops.id}) has ${admitted.remainingMicrousd} left; fund it with a budget change request, then probe again`,
            'probe',
          );
        case 'concurrency_limit_exceeded':
          throw new DomainError('concurrency_limit_exceeded', `${admitted.inFlight} probes are already in flight; retry shortly`, 'probe');
        default:
          throw new Error(`probe reservation refused: ${admitted.code}`);
      }
    }

    const command: DispatchCommandV1 = {
      action_id: actionId,
      request_id: requestId,
      workload_id: ops.id,
      environment: ops.environment,
      api_kind: apiKind,
      stream: false,
      attempt_role: 'probe',
      route: {
        route_id: target.routeId,
        route_version: c.version,
        model_alias: target.alias,
        provider_kind: kind,
        base_url: c.upstreamBaseUrl,
        upstream_model: c.upstreamModel,
        candidate_param: c.candidateParam,
        output_cap_param: c.outputCapParam,
        output_cap_semantics: semantics,
        price_revision_id: price.id,
        // dispatch resolves the key by this name, as for any call to the route
        credential_ref: c.credentialRef ?? null,
      },
      requested_candidates: PROBE_CANDIDATES,
      effective_candidates: PROBE_CANDIDATES,
      output_ceiling: PROBE_OUTPUT_CAP,
      include_usage_for_client: false,
      deadline: deadline.toISOString(),
      dispatch_deadline: dispatchDeadline.toISOString(),
      acceptance: { allow_length: true, allow_content_filter: true },
      request,
    };
    // Elapsed time from the monotonic timer: the wall clock may step, and a frozen one never moves.
    const started = performance.now();
    // Listening starts before the command leaves, so even an instant reply is seen; a reply
    // that never comes ends the wait at the dispatch deadline (reconciliation then resolves
    // the reservation like any other).
    const reply = this.replies.awaitReply(actionId, dispatchDeadline, now);
    try {
      await publishDispatchCommand(
        this.bus,
        this.cipher,
        command,
        { instanceId: this.config.instanceId, topic: 'probeReplies' },
        this.ids.next(),
      );
    } catch (err) {
      this.replies.cancel(actionId);
      if (err instanceof DomainError) throw err;
      // Withdrawn now unless a dispatcher took it (the publish may only seem to have failed).
      const withdrawal = await this.withdrawals.withdraw(actionId, this.clock.now()).catch(() => 'unknown' as const);
      throw withdrawal === 'voided'
        ? new DomainError(
            'service_unavailable',
            `the probe could not be handed to dispatch (${(err as Error).name}); nothing was sent upstream and its reservation is released; retry shortly`,
            'probe',
            { 'retry-after': '5' },
          )
        : new DomainError(
            'service_unavailable',
            `the probe could not be confirmed handed to dispatch (${(err as Error).name}); it may still run (action ${actionId}), and is settled like any action if it does`,
            'probe',
          );
    }
    return observe(await reply, {
      action_id: actionId,
      reserved_microusd: reservation.reservedMicrousd.toString(),
      kind,
      duration_ms: () => Math.round(performance.now() - started),
    });
  }
}

/** Counts and usage of a probe's reply (its content is parsed here and dropped). */
function observe(
  reply: DispatchReplyV1 | 'timeout',
  ctx: { action_id: string; reserved_microusd: string; kind: ProviderKind; duration_ms: () => number },
): ProbeObservation {
  const base = {
    action_id: ctx.action_id,
    reserved_microusd: ctx.reserved_microusd,
    requested_candidates: PROBE_CANDIDATES,
    output_cap: PROBE_OUTPUT_CAP,
    duration_ms: ctx.duration_ms(),
  };
  const none = {
    returned_candidates: null,
    usage_present: false,
    input_tokens: null,
    output_tokens_total: null,
    reasoning_tokens: null,
    provider_request_id: null,
    prompt_block_reason: null,
  };
  if (reply === 'timeout') return { ...base, ...none, attempt_id: null, http_status: null, provider_error: 'timeout' };
  if (reply.kind === 'error') {
    return {
      ...base,
      ...none,
      attempt_id: reply.attempt_id,
      http_status: reply.upstream_http_status ?? null,
      provider_error: `${reply.code}: ${reply.message}`,
      provider_request_id: reply.provider_request_id,
    };
  }
  if (reply.kind !== 'response') throw new Error(`a probe never streams, got a ${reply.kind} reply`);
  const parsed = adapterFor(ctx.kind).parseResponse(reply.body, {});
  return {
    ...base,
    attempt_id: reply.attempt_id,
    http_status: reply.http_status,
    provider_error: null,
    returned_candidates: parsed.candidates.length,
    usage_present: parsed.usage != null,
    input_tokens: parsed.usage?.inputTokens ?? null,
    output_tokens_total: parsed.usage?.outputTokensTotal ?? null,
    reasoning_tokens: parsed.usage?.reasoningTokens ?? null,
    provider_request_id: parsed.providerRequestId,
    prompt_block_reason: parsed.promptBlockReason,
  };
}
