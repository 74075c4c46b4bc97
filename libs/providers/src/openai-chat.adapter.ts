import type { DispatchCommandV1 } from '@gateway/contracts';
import { generatedTextBytes, spendFieldSpellings } from '@gateway/domain';
import {
  checkSubsets,
  countsReadable,
  headerValue,
  nonNegInt,
  ParsedCandidate,
  ParsedResponse,
  ParsedUsage,
  ProviderAdapter,
  reconcileWithTotal,
  StreamAccumulator,
  tierName,
  unknownUsageFields,
  UpstreamRequest,
} from './adapter';
import { takesCandidate } from './bounded';

/**
 * OpenAI chat completions and OpenAI-compatible aggregators. Every spelling of the candidate
 * count and the output cap is removed and exactly one of each is written, with the reserved
 * values, in the contract's field; usage is always requested on streams; the provider keeps no
 * prompt (`store: false`) unless the workload opted in.
 */
/**
 * The body for an OpenAI-family endpoint: the application's body on the upstream model, with
 * every spelling of the candidate count and the output cap removed (the caller writes the
 * reserved ones).
 */
export function openAiBody(cmd: DispatchCommandV1, dialect: 'openai-chat' | 'openai-responses'): Record<string, unknown> {
  const body: Record<string, unknown> = { ...cmd.request, model: cmd.route.upstream_model };
  const spellings = spendFieldSpellings(dialect, {
    candidateParam: cmd.route.candidate_param,
    outputCapParam: cmd.route.output_cap_param,
  });
  for (const f of [...spellings.candidate, ...spellings.cap]) delete body[f];
  return body;
}

/** JSON headers with the upstream key as OpenAI and its compatibles take it. */
export function bearerHeaders(credential: string | null): Record<string, string> {
  return { 'content-type': 'application/json', ...(credential ? { authorization: `Bearer ${credential}` } : {}) };
}

export class OpenAiChatAdapter implements ProviderAdapter {
  buildRequest(cmd: DispatchCommandV1, credential: string | null = null): UpstreamRequest {
    const body = openAiBody(cmd, 'openai-chat');
    body[cmd.route.candidate_param ?? 'n'] = cmd.effective_candidates;
    body[cmd.route.output_cap_param] = cmd.output_ceiling;
    if (!cmd.allow_provider_storage) {
      // OpenAI's field; an aggregator may not know it, and without it OpenAI's default is not to store.
      if (cmd.route.provider_kind === 'openai-chat') body.store = false;
      else delete body.store;
    }
    if (cmd.stream) {
      body.stream = true;
      body.stream_options = { ...(asRecord(body.stream_options) ?? {}), include_usage: true };
    } else {
      delete body.stream;
      delete body.stream_options;
    }
    return { url: joinUrl(cmd.route.base_url, '/v1/chat/completions'), headers: bearerHeaders(credential), body };
  }

  parseResponse(body: unknown, headers: Record<string, string | string[] | undefined>): ParsedResponse {
    const b = asRecord(body) ?? {};
    const choices = Array.isArray(b.choices) ? b.choices : [];
    return {
      providerRequestId: headerValue(headers, 'x-request-id') ?? (typeof b.id === 'string' ? b.id : null),
      candidates: choices.map((c, i) => toCandidate(asRecord(c) ?? {}, i)),
      promptBlockReason: null,
      usage: parseUsage(b.usage),
      serviceTier: serviceTierOf(b),
      featureCalls: {},
    };
  }

  streamAccumulator(headers: Record<string, string | string[] | undefined>): StreamAccumulator {
    const byIndex = new Map<number, { finishReason: string | null; hasContent: boolean; textBytes: number }>();
    let usage: ParsedUsage | null = null;
    let id: string | null = headerValue(headers, 'x-request-id');
    let serviceTier: string | null = null;
    let done = false;
    return {
      push(data: string): boolean {
        if (data.trim() === '[DONE]') {
          done = true;
          return false;
        }
        const chunk = asRecord(safeJson(data));
        if (!chunk) return true;
        if (!id && typeof chunk.id === 'string') id = chunk.id;
        // every chunk carries the tier; the last one reported wins
        serviceTier = serviceTierOf(chunk) ?? serviceTier;
        for (const raw of Array.isArray(chunk.choices) ? chunk.choices : []) {
          const c = asRecord(raw) ?? {};
          const index = nonNegInt(c.index);
          if (!takesCandidate(byIndex, index)) continue;
          const entry = byIndex.get(index) ?? { finishReason: null, hasContent: false, textBytes: 0 };
          const delta = asRecord(c.delta);
          if (
            delta &&
            ((typeof delta.content === 'string' && delta.content.length > 0) || Array.isArray(delta.tool_calls) || hasAudio(delta))
          ) {
            entry.hasContent = true;
          }
          if (delta) entry.textBytes += messageTextBytes(delta);
          if (typeof c.finish_reason === 'string') entry.finishReason = c.finish_reason;
          byIndex.set(index, entry);
        }
        if (chunk.usage) usage = parseUsage(chunk.usage);
        return true;
      },
      result(): ParsedResponse {
        return {
          providerRequestId: id,
          candidates: [...byIndex.entries()].sort(([a], [b]) => a - b).map(([index, e]) => ({ index, ...e })),
          promptBlockReason: null,
          usage,
          serviceTier,
          featureCalls: {},
        };
      },
      get sawUsage() {
        return usage !== null;
      },
      get finished() {
        return done;
      },
    };
  }

  errorCode(body: unknown): string | null {
    const err = asRecord(asRecord(body)?.error);
    const code = err?.code ?? err?.type;
    return typeof code === 'string' ? code : null;
  }
}

function toCandidate(c: Record<string, unknown>, fallbackIndex: number): ParsedCandidate {
  const message = asRecord(c.message);
  const content = message?.content;
  const hasContent =
    (typeof content === 'string' && content.length > 0) ||
    (Array.isArray(message?.tool_calls) && message!.tool_calls.length > 0) ||
    (message !== null && hasAudio(message));
  return {
    index: typeof c.index === 'number' ? c.index : fallbackIndex,
    finishReason: typeof c.finish_reason === 'string' ? c.finish_reason : null,
    hasContent,
    textBytes: message ? messageTextBytes(message) : 0,
  };
}

/** An audio answer (`modalities: ["audio"]`) comes as `message.audio` (stream: `delta.audio`), content null. */
function hasAudio(message: Record<string, unknown>): boolean {
  const audio = asRecord(message.audio);
  return audio !== null && ((typeof audio.data === 'string' && audio.data.length > 0) || typeof audio.id === 'string');
}

/**
 * Bytes of what the model generated in a message or a stream delta: its text (a string or text
 * parts), refusal, and tool calls' names and arguments. A count for the usage floor, never kept.
 */
function messageTextBytes(message: Record<string, unknown>): number {
  let bytes = 0;
  const content = message.content;
  if (typeof content === 'string') bytes += generatedTextBytes(content);
  else if (Array.isArray(content)) for (const part of content) bytes += textOf(asRecord(part)?.text);
  bytes += textOf(message.refusal);
  for (const call of Array.isArray(message.tool_calls) ? message.tool_calls : []) {
    const fn = asRecord(asRecord(call)?.function);
    bytes += textOf(fn?.name) + textOf(fn?.arguments);
  }
  return bytes;
}

function textOf(v: unknown): number {
  return typeof v === 'string' ? generatedTextBytes(v) : 0;
}

/**
 * `service_tier` of a response or chunk (OpenAI: `default`, `flex`, `priority`, `scale`). `auto`
 * is the request echoed (a Responses stream's first events), not a tier that was billed.
 */
export function serviceTierOf(b: Record<string, unknown>): string | null {
  return tierName(b.service_tier);
}

/**
 * `cache_creation_input_tokens` / `cache_read_input_tokens` are the Anthropic spellings some
 * OpenAI-compatible proxies (LiteLLM) put beside `prompt_tokens`, which includes them.
 */
const KNOWN_USAGE = [
  'prompt_tokens',
  'completion_tokens',
  'total_tokens',
  'prompt_tokens_details',
  'completion_tokens_details',
  'cache_creation_input_tokens',
  'cache_read_input_tokens',
];
/**
 * `cache_write_tokens`: OpenRouter, for models with explicit caching and a cache-write price.
 * `text_tokens` (and input `image_tokens`) are the audio models' breakdown of the rest, billed at
 * the text rate: subsets, not extra tokens.
 */
const KNOWN_PROMPT_DETAILS = ['cached_tokens', 'cache_write_tokens', 'audio_tokens', 'text_tokens', 'image_tokens'];
const KNOWN_COMPLETION_DETAILS = [
  'reasoning_tokens',
  'audio_tokens',
  'image_tokens',
  'text_tokens',
  'accepted_prediction_tokens',
  'rejected_prediction_tokens',
];

/**
 * completion_tokens already includes reasoning, audio and image tokens; cached, cache-write and
 * audio tokens are part of prompt_tokens. A detail reported in two spellings counts once (the
 * larger).
 */
/** The counts a wrong value of would bill less than was used (cache writes are dearer than input). */
const READ_COUNTS = ['prompt_tokens', 'completion_tokens', 'total_tokens', 'cache_creation_input_tokens'] as const;

function parseUsage(raw: unknown): ParsedUsage | null {
  const u = asRecord(raw);
  if (!u || typeof u.prompt_tokens !== 'number' || typeof u.completion_tokens !== 'number') return null;
  if (!countsReadable(u, READ_COUNTS)) return null;
  const promptDetails = asRecord(u.prompt_tokens_details) ?? {};
  const completionDetails = asRecord(u.completion_tokens_details) ?? {};
  const usage = reconcileWithTotal(
    {
      inputTokens: nonNegInt(u.prompt_tokens),
      cachedInputTokens: Math.max(nonNegInt(promptDetails.cached_tokens), nonNegInt(u.cache_read_input_tokens)),
      cacheWriteInputTokens: Math.max(nonNegInt(promptDetails.cache_write_tokens), nonNegInt(u.cache_creation_input_tokens)),
      audioInputTokens: nonNegInt(promptDetails.audio_tokens),
      outputTokensTotal: nonNegInt(u.completion_tokens),
      reasoningTokens: nonNegInt(completionDetails.reasoning_tokens),
      audioOutputTokens: nonNegInt(completionDetails.audio_tokens),
      imageOutputTokens: nonNegInt(completionDetails.image_tokens),
      unknownFields: [
        ...unknownUsageFields(u, KNOWN_USAGE),
        ...unknownUsageFields(promptDetails, KNOWN_PROMPT_DETAILS, 'prompt_tokens_details.'),
        ...unknownUsageFields(completionDetails, KNOWN_COMPLETION_DETAILS, 'completion_tokens_details.'),
      ],
    },
    u.total_tokens,
  );
  return checkSubsets(usage);
}

export function asRecord(v: unknown): Record<string, unknown> | null {
  return v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : null;
}

export function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

export function joinUrl(base: string, path: string): string {
  return base.replace(/\/+$/, '') + path;
}
