import { performance } from 'node:perf_hooks';
import { Injectable } from '@nestjs/common';
import { Dispatcher, request } from 'undici';
import type { DispatchCommandV1, ProviderKind } from '@gateway/contracts';
import type { RouteContractVersionView } from '@gateway/db';
import { adapterFor } from '@gateway/providers';
import type { Clock, IdGenerator } from '@gateway/service-kit';

/** How many candidates a probe asks for, and the tiny per-candidate output cap it sets. */
export const PROBE_CANDIDATES = 2;
export const PROBE_OUTPUT_CAP = 16;
const PROBE_PROMPT = 'Reply with the single word: ok';

/** What came back from one probe call: counts, usage and status only, never content. */
export interface ProbeObservation {
  url: string;
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
 * Sends one tiny multi-candidate request to a route's upstream exactly as dispatch would (same
 * adapter, same parameter names from the contract). It costs a few tokens; it is only run when an
 * operator asks for it.
 */
@Injectable()
export class RouteProbe {
  constructor(
    private readonly opts: { timeoutMs: number; dispatcher?: Dispatcher },
    private readonly clock: Clock,
    private readonly ids: IdGenerator,
  ) {}

  async run(target: ProbeTarget): Promise<ProbeObservation> {
    const c = target.contract;
    const kind = c.providerKind as ProviderKind;
    const adapter = adapterFor(kind);
    const deadline = new Date(this.clock.now().getTime() + this.opts.timeoutMs).toISOString();
    const cmd: DispatchCommandV1 = {
      action_id: `probe-${this.ids.next()}`,
      request_id: this.ids.next(),
      workload_id: 'policy-probe',
      environment: 'probe',
      api_kind: kind === 'gemini-generate' ? 'gemini-generate' : 'openai-chat',
      stream: false,
      route: {
        route_id: target.routeId,
        route_version: c.version,
        model_alias: target.alias,
        provider_kind: kind,
        base_url: c.upstreamBaseUrl,
        upstream_model: c.upstreamModel,
        candidate_param: c.candidateParam,
        output_cap_param: c.outputCapParam,
        output_cap_semantics: c.outputCapSemantics === 'per_candidate' || c.outputCapSemantics === 'shared' ? c.outputCapSemantics : null,
        price_revision_id: 'probe',
      },
      requested_candidates: PROBE_CANDIDATES,
      effective_candidates: PROBE_CANDIDATES,
      output_ceiling: PROBE_OUTPUT_CAP,
      include_usage_for_client: false,
      deadline,
      dispatch_deadline: deadline,
      acceptance: { allow_length: true, allow_content_filter: true },
      request:
        kind === 'gemini-generate'
          ? { contents: [{ role: 'user', parts: [{ text: PROBE_PROMPT }] }] }
          : { model: target.alias, messages: [{ role: 'user', content: PROBE_PROMPT }] },
    };
    const req = adapter.buildRequest(cmd);
    // Elapsed time from the monotonic timer: the wall clock may step, and a frozen one never moves.
    const started = performance.now();
    const base = { url: req.url, requested_candidates: PROBE_CANDIDATES, output_cap: PROBE_OUTPUT_CAP };
    try {
      const res = await request(req.url, {
        method: 'POST',
        headers: req.headers,
        body: JSON.stringify(req.body),
        headersTimeout: this.opts.timeoutMs,
        bodyTimeout: this.opts.timeoutMs,
        ...(this.opts.dispatcher ? { dispatcher: this.opts.dispatcher } : {}),
      });
      const body = safeJson(await res.body.text());
      const ok = res.statusCode < 400;
      const parsed = ok ? adapter.parseResponse(body, res.headers) : null;
      return {
        ...base,
        http_status: res.statusCode,
        provider_error: ok ? null : adapter.errorCode(body),
        returned_candidates: parsed ? parsed.candidates.length : null,
        usage_present: parsed?.usage != null,
        input_tokens: parsed?.usage?.inputTokens ?? null,
        output_tokens_total: parsed?.usage?.outputTokensTotal ?? null,
        reasoning_tokens: parsed?.usage?.reasoningTokens ?? null,
        provider_request_id: parsed?.providerRequestId ?? null,
        prompt_block_reason: parsed?.promptBlockReason ?? null,
        duration_ms: Math.round(performance.now() - started),
      };
    } catch (err) {
      return {
        ...base,
        http_status: null,
        provider_error: /timeout/i.test(String((err as Error)?.message)) ? 'timeout' : 'connection_failed',
        returned_candidates: null,
        usage_present: false,
        input_tokens: null,
        output_tokens_total: null,
        reasoning_tokens: null,
        provider_request_id: null,
        prompt_block_reason: null,
        duration_ms: Math.round(performance.now() - started),
      };
    }
  }
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}
