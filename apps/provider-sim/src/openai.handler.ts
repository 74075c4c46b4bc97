// POST /v1/chat/completions in the OpenAI chat-completions shape.
import { sendJson, sse } from './http';
import {
  InvalidRequest,
  MAX_CANDIDATES,
  optionalCount,
  sendStream,
  type ErrorDetail,
  type Exchange,
  type PlanSource,
  type ProviderAdapter,
} from './exchange';
import { openAiMediaAsked, reportedTier } from './billing-detail';
import { interleave, planResponse, type SimCandidate, type SimFinish, type SimPlan } from './simulate';
import { estimatePromptTokens } from './text';

const FINISH: Record<SimFinish, string> = { stop: 'stop', length: 'length', filter: 'content_filter' };

function errorType(status: number): string {
  if (status === 429) return 'requests';
  if (status >= 500) return 'server_error';
  return 'invalid_request_error';
}

function defaultCode(status: number): string | null {
  if (status === 401) return 'invalid_api_key';
  if (status === 404) return 'model_not_found';
  if (status === 429) return 'rate_limit_exceeded';
  return null;
}

/** A message's text content (string or array of text parts). */
function contentText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content.map((part) => (typeof part?.text === 'string' ? part.text : '')).join('');
}

/** Characters of a message's text content. */
function contentChars(content: unknown): number {
  return contentText(content).length;
}

/** A few bytes standing in for generated audio (base64 of a WAV header); never decoded. */
export const SIM_AUDIO_B64 = 'UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQAAAAA=';

/** Usage as OpenAI reports it; a cache write (OpenRouter's spelling) and image tokens only when there are some. */
export function openAiUsage(plan: SimPlan) {
  const completion = plan.outputTokens + plan.reasoningTokens;
  return {
    prompt_tokens: plan.promptTokens,
    completion_tokens: completion,
    total_tokens: plan.promptTokens + completion,
    prompt_tokens_details: {
      cached_tokens: plan.cachedTokens,
      audio_tokens: plan.audioInputTokens,
      ...(plan.cacheWriteTokens ? { cache_write_tokens: plan.cacheWriteTokens } : {}),
    },
    completion_tokens_details: {
      reasoning_tokens: plan.reasoningTokens,
      audio_tokens: plan.audioOutputTokens,
      accepted_prediction_tokens: 0,
      rejected_prediction_tokens: 0,
      ...(plan.imageOutputTokens ? { image_tokens: plan.imageOutputTokens } : {}),
    },
  };
}

/** An audio answer has no content: its words are the transcript of `message.audio`. */
function choice(c: SimCandidate, audioId: string) {
  const text = c.finish === 'filter' ? null : c.words.join(' ');
  const message =
    c.audioTokens > 0
      ? { role: 'assistant', content: null, refusal: null, audio: { id: audioId, data: SIM_AUDIO_B64, expires_at: 0, transcript: text } }
      : { role: 'assistant', content: text, refusal: null };
  return { index: c.index, message, logprobs: null, finish_reason: FINISH[c.finish] };
}

export const openAiChat: ProviderAdapter = {
  provider: 'openai',
  endpoint: 'openai.chat_completions',

  errorBody(status: number, message: string, detail: ErrorDetail = {}) {
    return { error: { message, type: errorType(status), param: detail.param ?? null, code: detail.code ?? defaultCode(status) } };
  },

  parse(body: unknown) {
    if (!body || typeof body !== 'object' || Array.isArray(body)) throw new InvalidRequest('The request body must be a JSON object.');
    const b = body as Record<string, unknown>;
    if (typeof b.model !== 'string' || !b.model) throw new InvalidRequest('you must provide a model parameter', { param: 'model' });
    if (!Array.isArray(b.messages))
      throw new InvalidRequest("Missing required parameter: 'messages'.", { param: 'messages', code: 'missing_required_parameter' });
    const asked = optionalCount(
      b.n,
      'n',
      `Invalid 'n': expected an integer between 1 and ${MAX_CANDIDATES}.`,
      'invalid_value',
      MAX_CANDIDATES,
    );
    const maxTokens = optionalCount(b.max_tokens, 'max_tokens', "Invalid 'max_tokens': expected an integer >= 1.", 'invalid_value');
    const maxCompletion = optionalCount(
      b.max_completion_tokens,
      'max_completion_tokens',
      "Invalid 'max_completion_tokens': expected an integer >= 1.",
      'invalid_value',
    );
    return {
      modelSpec: b.model,
      asked,
      cap: maxCompletion ?? maxTokens,
      stream: b.stream === true,
      promptTokens: estimatePromptTokens(b.messages.map((m) => contentChars(m?.content))),
      lastText: contentText(b.messages[b.messages.length - 1]?.content),
    };
  },

  plan(src: PlanSource) {
    const media = openAiMediaAsked(src.body);
    return planResponse({ ...src.parsed, seed: src.ctx.seed, fingerprint: src.fingerprint, script: src.resolved.script, media });
  },

  async respond(ex: Exchange) {
    const { script, model } = ex.resolved;
    const { parsed } = ex;
    if (script.rejectN && (parsed.asked ?? 1) > 1) {
      return ex.fail(400, `Invalid 'n': this model only supports n=1 (got ${parsed.asked}).`, { param: 'n', code: 'invalid_value' });
    }
    if (script.block) {
      return ex.fail(400, 'Your request was rejected as a result of our safety system.', { code: 'content_policy_violation' });
    }
    const { plan } = ex;
    const id = `chatcmpl-sim-${ex.id}`;
    const created = Math.floor(Date.now() / 1000);
    const headers = { 'x-request-id': `req_sim_${ex.id}` };
    // the request id OpenAI's logs and the gateway's attempt record key on (the body id is per response)
    ex.entry.providerRequestId = headers['x-request-id'];
    const audioId = (index: number) => `audio_sim_${ex.id}_${index}`;
    // Reported only when the request names a tier or the script sets one (older answers unchanged).
    const tier = ex.body.service_tier !== undefined || script.tier ? { service_tier: reportedTier(ex.body, script) } : {};

    if (!parsed.stream) {
      return sendJson(
        ex.res,
        200,
        {
          id,
          object: 'chat.completion',
          created,
          model,
          choices: plan.candidates.map((c) => choice(c, audioId(c.index))),
          ...(script.padBytes ? { sim_padding: 'x'.repeat(script.padBytes) } : {}),
          ...(script.noUsage ? {} : { usage: openAiUsage(plan) }),
          ...tier,
          system_fingerprint: 'fp_sim',
        },
        headers,
      );
    }

    const includeUsage = ex.body.stream_options?.include_usage === true;
    const base = { id, object: 'chat.completion.chunk', created, model, ...tier, system_fingerprint: 'fp_sim' };
    const usageNull = includeUsage ? { usage: null } : {};
    const padding = script.padChunks ? { sim_padding: 'x'.repeat(script.padChunks) } : {};
    const chunk = (index: number, delta: object, finish: string | null) =>
      sse({ ...base, choices: [{ index, delta, logprobs: null, finish_reason: finish }], ...usageNull, ...padding });
    const perChoice = plan.candidates.map((c) => [
      chunk(c.index, { role: 'assistant', content: '', refusal: null }, null),
      ...c.words.map((w, k) =>
        chunk(
          c.index,
          c.audioTokens > 0
            ? { audio: { id: audioId(c.index), transcript: k ? ` ${w}` : w, data: SIM_AUDIO_B64 } }
            : { content: k ? ` ${w}` : w },
          null,
        ),
      ),
      chunk(c.index, {}, FINISH[c.finish]),
    ]);
    const usage = includeUsage && !script.noUsage ? sse({ ...base, choices: [], usage: openAiUsage(plan) }) : '';
    await sendStream(ex, 'text/event-stream; charset=utf-8', interleave(perChoice).join(''), usage + sse('[DONE]'), headers);
  },
};
