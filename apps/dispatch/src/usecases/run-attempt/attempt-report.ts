import type { AcceptanceVerdict, AttemptCompletedV1, DeliveryOutcome, DispatchCommandV1 } from '@gateway/contracts';
import { accept, candidateShortfall, NormalisedCandidate, outputTokensFloor } from '@gateway/domain';
import { billedExtras, ParsedResponse } from '@gateway/providers';

type CandidateOutcomeV1 = AttemptCompletedV1['candidates'][number];

export type AttemptStatus = 'succeeded' | 'failed' | 'cancelled' | 'usage_missing';

/** Pure: turns what the provider said into the sanitised attempt event (no content). */
export function buildAttemptEvent(input: {
  eventId: string;
  cmd: DispatchCommandV1;
  attemptId: string;
  attemptNo: number;
  role: AttemptCompletedV1['attempt_role'];
  status: AttemptStatus;
  httpStatus: number | null;
  parsed: ParsedResponse | null;
  usageSource: 'provider_response' | 'stream_final_chunk' | null;
  now: Date;
  attemptsTotal: number;
  actionFinal: boolean;
}): AttemptCompletedV1 {
  const { cmd, parsed } = input;
  const shortfall = parsed ? shortfallOf(cmd, parsed) : null;
  const usage = parsed?.usage ?? null;
  const extras = parsed ? billedExtras(cmd.request, cmd.api_kind, parsed) : null;
  return {
    event_id: input.eventId,
    timestamp: input.now.toISOString(),
    request_id: cmd.request_id,
    action_id: cmd.action_id,
    attempt_id: input.attemptId,
    attempt_no: input.attemptNo,
    attempt_role: input.role,
    workload_id: cmd.workload_id,
    environment: cmd.environment,
    route_id: cmd.route.route_id,
    route_version: cmd.route.route_version,
    model_alias: cmd.route.model_alias,
    provider_request_id: parsed?.providerRequestId ?? null,
    requested_candidate_count: cmd.requested_candidates,
    effective_candidate_count: cmd.effective_candidates,
    returned_candidate_count: shortfall ? shortfall.returnedWithContent : null,
    input_tokens: usage?.inputTokens ?? null,
    output_tokens_total: usage?.outputTokensTotal ?? null,
    total_tokens: usage ? usage.inputTokens + usage.outputTokensTotal : null,
    cached_input_tokens: usage?.cachedInputTokens ?? null,
    reasoning_tokens: usage?.reasoningTokens ?? null,
    output_includes_reasoning: true,
    stream_mode: cmd.stream ? 'sse' : 'none',
    usage_source: usage ? input.usageSource : null,
    quota_scope: 'workload',
    policy_result: null,
    policy_reason: null,
    outcome: input.status,
    http_status: input.httpStatus,
    candidates: shortfall?.perCandidate ?? [],
    prompt_block_reason: parsed?.promptBlockReason ?? null,
    attempts_total: input.attemptsTotal,
    action_final: input.actionFinal,
    cache_write_input_tokens: usage?.cacheWriteInputTokens ?? null,
    audio_input_tokens: usage?.audioInputTokens ?? null,
    audio_output_tokens: usage?.audioOutputTokens ?? null,
    image_output_tokens: usage?.imageOutputTokens ?? null,
    service_tier: usage && extras ? extras.serviceTier : null,
    ...(extras ? { feature_calls: extras.featureCalls } : {}),
    ...(usage && usage.unknownFields.length > 0 ? { usage_unknown_fields: usage.unknownFields } : {}),
    ...(parsed && cmd.effective_candidates > 1 ? { output_tokens_floor: floorOf(parsed) } : {}),
  };
}

/** The usage floor of the candidates in the response, from their sizes (the text stays here). */
function floorOf(parsed: ParsedResponse): number {
  return outputTokensFloor(parsed.candidates.map((c) => ({ textBytes: c.textBytes ?? 0, tokenCount: c.tokenCount ?? null })));
}

export function shortfallOf(cmd: DispatchCommandV1, parsed: ParsedResponse) {
  const s = candidateShortfall({
    effective: cmd.effective_candidates,
    returned: parsed.candidates as NormalisedCandidate[],
    promptBlockReason: parsed.promptBlockReason,
    providerKind: cmd.route.provider_kind,
  });
  const present: CandidateOutcomeV1[] = s.perCandidate.map((c) => ({
    index: c.index,
    finish_reason: parsed.candidates.find((p) => p.index === c.index)?.finishReason ?? null,
    outcome: c.outcome,
  }));
  // Requested indexes the response lacks are recorded too: blocked with the prompt, or missing.
  const seen = new Set(present.map((c) => c.index));
  const absent: CandidateOutcomeV1[] = [];
  for (let index = 0; index < cmd.effective_candidates; index++) {
    if (!seen.has(index)) absent.push({ index, finish_reason: null, outcome: s.blocked ? 'blocked' : 'missing' });
  }
  const perCandidate = [...present, ...absent].sort((a, b) => a.index - b.index);
  return { ...s, perCandidate, returnedWithContent: parsed.candidates.filter((c) => c.hasContent).length };
}

export interface DeliveryReport {
  outcome: DeliveryOutcome;
  /** null when there was no answer to judge */
  verdict: AcceptanceVerdict | null;
  verdictReason: string | null;
}

/**
 * Pure: what the user got from this attempt and whether it was a valid answer, apart from the
 * money (usage present or not is settlement's business, never the delivery's). A response the
 * provider gave is `answered` whatever the acceptance verdict says; a refused prompt is
 * `refused`; an answer after the deadline is `deadline`; an error answer or no answer at all is
 * `failed`, or `deadline` when the action's deadline had passed by then.
 */
export function deliveryOf(input: {
  cmd: DispatchCommandV1;
  httpStatus: number | null;
  parsed: ParsedResponse | null;
  receivedAt: Date;
  /** streams only: whether the provider's whole stream arrived; a cut stream was not delivered */
  streamFinished?: boolean | null;
}): DeliveryReport {
  const { cmd, parsed } = input;
  const answered = parsed !== null && input.httpStatus !== null && input.httpStatus < 400 && input.streamFinished !== false;
  if (!answered) {
    const late = input.receivedAt.getTime() >= new Date(cmd.deadline).getTime();
    return { outcome: late ? 'deadline' : 'failed', verdict: null, verdictReason: null };
  }
  const verdict = accept(
    { providerKind: cmd.route.provider_kind, candidates: parsed.candidates, promptBlockReason: parsed.promptBlockReason },
    {
      allowLength: cmd.acceptance.allow_length,
      allowContentFilter: cmd.acceptance.allow_content_filter,
      receivedAt: input.receivedAt,
      deadline: new Date(cmd.deadline),
    },
  );
  const outcome: DeliveryOutcome =
    verdict.reason === 'after_deadline' ? 'deadline' : verdict.reason === 'prompt_blocked' ? 'refused' : 'answered';
  return { outcome, verdict: verdict.valid ? 'valid' : 'invalid', verdictReason: verdict.reason };
}
