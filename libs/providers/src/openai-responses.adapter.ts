import type { DispatchCommandV1 } from '@gateway/contracts';
import { NormalisedCandidate } from '@gateway/domain';
import {
  checkSubsets,
  countsReadable,
  FeatureCalls,
  headerValue,
  NO_USAGE_DETAILS,
  nonNegInt,
  ParsedResponse,
  ParsedUsage,
  ProviderAdapter,
  reconcileWithTotal,
  StreamAccumulator,
  unknownUsageFields,
  UpstreamRequest,
} from './adapter';
import { asRecord, bearerHeaders, joinUrl, openAiBody, safeJson, serviceTierOf } from './openai-chat.adapter';
import { DistinctCount } from './bounded';

/**
 * The OpenAI Responses API (`POST /v1/responses`) on an `openai-chat` route. One response is one
 * candidate; the cap is `max_output_tokens`, always written with the reserved ceiling (every
 * other spelling removed); the provider keeps nothing (`store: false`) unless the workload opted
 * in. Usage comes from the response object, whole or in the stream's terminal event
 * (`response.completed`, `response.incomplete`, `response.failed`); a stream cut before one
 * carries no usage and goes to reconciliation.
 */
export class OpenAiResponsesAdapter implements ProviderAdapter {
  buildRequest(cmd: DispatchCommandV1, credential: string | null = null): UpstreamRequest {
    const body = openAiBody(cmd, 'openai-responses');
    delete body.n;
    body.max_output_tokens = cmd.output_ceiling;
    if (!cmd.allow_provider_storage) body.store = false;
    if (cmd.stream) body.stream = true;
    else {
      delete body.stream;
      delete body.stream_options;
    }
    return { url: joinUrl(cmd.route.base_url, '/v1/responses'), headers: bearerHeaders(credential), body };
  }

  parseResponse(body: unknown, headers: Record<string, string | string[] | undefined>): ParsedResponse {
    const r = asRecord(body) ?? {};
    const facts = responseFacts(r);
    return {
      providerRequestId: headerValue(headers, 'x-request-id') ?? (typeof r.id === 'string' ? r.id : null),
      candidates: facts.candidate ? [facts.candidate] : [],
      promptBlockReason: null,
      usage: facts.usage,
      serviceTier: serviceTierOf(r),
      featureCalls: facts.featureCalls,
    };
  }

  streamAccumulator(headers: Record<string, string | string[] | undefined>): StreamAccumulator {
    let id: string | null = headerValue(headers, 'x-request-id');
    let began = false;
    let streamedContent = false;
    let final: ReturnType<typeof responseFacts> | null = null;
    let serviceTier: string | null = null;
    // hosted-tool calls as they stream, by id: a stream cut before its terminal event still
    // evidences the calls that ran (reconciliation then has them). Only their ids are kept, in
    // bounded memory; the items themselves (a message item carries the whole text) are not.
    const streamedCalls = new Map<HostedToolFeature, DistinctCount>();
    return {
      push(data: string): boolean {
        if (data.trim() === '[DONE]') return false;
        const event = asRecord(safeJson(data));
        const type = event?.type;
        if (!event || typeof type !== 'string') return true;
        const response = asRecord(event.response);
        if (!id && typeof response?.id === 'string') id = response.id;
        if (response) serviceTier = serviceTierOf(response) ?? serviceTier;
        if (type === 'response.created' || type === 'response.in_progress') began = true;
        else if (type === 'response.output_text.delta' && typeof event.delta === 'string' && event.delta.length > 0) streamedContent = true;
        else if (type === 'response.output_item.added' && isToolCall(asRecord(event.item))) streamedContent = true;
        const item = asRecord(event.item);
        if (item && typeof item.id === 'string' && (type === 'response.output_item.added' || type === 'response.output_item.done')) {
          const feature = hostedToolFeature(item);
          if (feature) {
            const calls = streamedCalls.get(feature) ?? new DistinctCount();
            calls.add(item.id);
            streamedCalls.set(feature, calls);
          }
        } else if (TERMINAL_EVENTS.has(type) && response) final = responseFacts(response);
        return true;
      },
      result(): ParsedResponse {
        const candidate: NormalisedCandidate | null = final
          ? {
              index: 0,
              finishReason: final.candidate?.finishReason ?? null,
              hasContent: streamedContent || (final.candidate?.hasContent ?? false),
            }
          : began || streamedContent
            ? { index: 0, finishReason: null, hasContent: streamedContent }
            : null;
        return {
          providerRequestId: id,
          candidates: candidate ? [candidate] : [],
          promptBlockReason: null,
          usage: final?.usage ?? null,
          serviceTier,
          featureCalls: final?.featureCalls ?? Object.fromEntries([...streamedCalls].map(([feature, calls]) => [feature, calls.size])),
        };
      },
      get sawUsage() {
        return final?.usage != null;
      },
      get finished() {
        return final !== null;
      },
    };
  }

  errorCode(body: unknown): string | null {
    const err = asRecord(asRecord(body)?.error);
    const code = err?.code ?? err?.type;
    return typeof code === 'string' ? code : null;
  }
}

/** The events that end a Responses stream; each carries the whole response object. */
const TERMINAL_EVENTS: ReadonlySet<string> = new Set(['response.completed', 'response.incomplete', 'response.failed']);

/**
 * The one candidate and the usage of a response object. Its `status` maps onto the gateway's
 * finish reasons: `completed` → stop, `incomplete` for `max_output_tokens` → length and for
 * `content_filter` → content_filter (acceptance then applies as for chat), anything else → other.
 */
function responseFacts(r: Record<string, unknown>): {
  candidate: NormalisedCandidate | null;
  usage: ParsedUsage | null;
  featureCalls: FeatureCalls;
} {
  const output = Array.isArray(r.output) ? r.output.map(asRecord) : null;
  const featureCalls = hostedToolCalls(output ?? []);
  if (!output && typeof r.status !== 'string') return { candidate: null, usage: parseUsage(r.usage), featureCalls };
  const hasContent = (output ?? []).some((item) => isToolCall(item) || (item?.type === 'message' && hasOutputText(item)));
  return { candidate: { index: 0, finishReason: finishReason(r), hasContent }, usage: parseUsage(r.usage), featureCalls };
}

type HostedToolFeature = 'web_search' | 'file_search' | 'code_execution';

/** Output item types of hosted tools OpenAI bills per call, and the feature each is priced as. */
const HOSTED_TOOL_CALLS: Readonly<Record<string, HostedToolFeature>> = {
  web_search_call: 'web_search',
  file_search_call: 'file_search',
  code_interpreter_call: 'code_execution',
};

/** The billed feature an output item is a call of, if it is a hosted tool's. */
function hostedToolFeature(item: Record<string, unknown> | null): HostedToolFeature | null {
  const type = item?.type;
  return typeof type === 'string' && Object.hasOwn(HOSTED_TOOL_CALLS, type) ? HOSTED_TOOL_CALLS[type] : null;
}

/** One billed call per hosted-tool output item (a web search that opened a page is a call too). */
function hostedToolCalls(output: (Record<string, unknown> | null)[]): FeatureCalls {
  const calls: FeatureCalls = {};
  for (const item of output) {
    const feature = hostedToolFeature(item);
    if (feature) calls[feature] = (calls[feature] ?? 0) + 1;
  }
  return calls;
}

function finishReason(r: Record<string, unknown>): string | null {
  switch (r.status) {
    case 'completed':
      return 'stop';
    case 'incomplete': {
      const reason = asRecord(r.incomplete_details)?.reason;
      return reason === 'max_output_tokens' ? 'length' : reason === 'content_filter' ? 'content_filter' : 'other';
    }
    case undefined:
    case null:
      return null;
    default:
      return 'other';
  }
}

function hasOutputText(message: Record<string, unknown>): boolean {
  const content = Array.isArray(message.content) ? message.content : [];
  return content.some((part) => {
    const p = asRecord(part);
    return p?.type === 'output_text' && typeof p.text === 'string' && p.text.length > 0;
  });
}

/** A call of a tool the caller runs (like chat's tool_calls) is an answer the app can act on. */
function isToolCall(item: Record<string, unknown> | null): boolean {
  return item?.type === 'function_call' || item?.type === 'custom_tool_call';
}

const KNOWN_USAGE = ['input_tokens', 'input_tokens_details', 'output_tokens', 'output_tokens_details', 'total_tokens'];
/** The Responses API reports no audio, image or cache-write detail; one that appears opens a case. */
const KNOWN_INPUT_DETAILS = ['cached_tokens'];
const KNOWN_OUTPUT_DETAILS = ['reasoning_tokens'];

/**
 * The same inclusive totals as chat completions: `input_tokens` includes the cached ones and
 * `output_tokens` the reasoning ones, so they map onto the same ParsedUsage (and settlement takes
 * the cached and reasoning parts out of input and output before pricing each category once).
 */
function parseUsage(raw: unknown): ParsedUsage | null {
  const u = asRecord(raw);
  if (!u || typeof u.input_tokens !== 'number' || typeof u.output_tokens !== 'number') return null;
  if (!countsReadable(u, ['input_tokens', 'output_tokens', 'total_tokens'])) return null;
  const inputDetails = asRecord(u.input_tokens_details) ?? {};
  const outputDetails = asRecord(u.output_tokens_details) ?? {};
  const usage = reconcileWithTotal(
    {
      inputTokens: nonNegInt(u.input_tokens),
      ...NO_USAGE_DETAILS,
      cachedInputTokens: nonNegInt(inputDetails.cached_tokens),
      outputTokensTotal: nonNegInt(u.output_tokens),
      reasoningTokens: nonNegInt(outputDetails.reasoning_tokens),
      unknownFields: [
        ...unknownUsageFields(u, KNOWN_USAGE),
        ...unknownUsageFields(inputDetails, KNOWN_INPUT_DETAILS, 'input_tokens_details.'),
        ...unknownUsageFields(outputDetails, KNOWN_OUTPUT_DETAILS, 'output_tokens_details.'),
      ],
    },
    u.total_tokens,
  );
  return checkSubsets(usage);
}
