import type { DispatchCommandV1 } from '@gateway/contracts';
import { generatedTextBytes, spendFieldSpellings } from '@gateway/domain';
import {
  checkSubsets,
  countsReadable,
  FeatureCalls,
  headerValue,
  nonNegInt,
  ParsedCandidate,
  ParsedResponse,
  ParsedUsage,
  ProviderAdapter,
  reconcileWithTotal,
  StreamAccumulator,
  unknownUsageFields,
  UpstreamRequest,
} from './adapter';
import { asRecord, joinUrl, safeJson } from './openai-chat.adapter';
import { DistinctCount, takesCandidate } from './bounded';

/**
 * Gemini generateContent. Every spelling of the candidate count and the cap (`candidateCount` /
 * `candidate_count`, `maxOutputTokens` / `max_output_tokens`, under `generationConfig` or
 * `generation_config`) is removed and exactly one of each is written, with the reserved values; every candidate is read (never only candidates[0]); a blocked prompt comes as
 * `promptFeedback.blockReason` with no candidates.
 */
export class GeminiGenerateAdapter implements ProviderAdapter {
  buildRequest(cmd: DispatchCommandV1, credential: string | null = null): UpstreamRequest {
    const body: Record<string, unknown> = { ...cmd.request };
    delete body.model;
    // Admission sends the canonical spelling; a snake_case config must still never survive beside it.
    const generationConfig: Record<string, unknown> = {
      ...(asRecord(body.generation_config) ?? {}),
      ...(asRecord(body.generationConfig) ?? {}),
    };
    delete body.generation_config;
    const spellings = spendFieldSpellings('gemini-generate', {
      candidateParam: cmd.route.candidate_param,
      outputCapParam: cmd.route.output_cap_param,
    });
    for (const f of [...spellings.candidate, ...spellings.cap]) delete generationConfig[f];
    generationConfig[cmd.route.candidate_param ?? 'candidateCount'] = cmd.effective_candidates;
    generationConfig[cmd.route.output_cap_param] = cmd.output_ceiling;
    body.generationConfig = generationConfig;
    const method = cmd.stream ? 'streamGenerateContent?alt=sse' : 'generateContent';
    const headers: Record<string, string> = { 'content-type': 'application/json' };
    if (credential) headers['x-goog-api-key'] = credential;
    return {
      url: joinUrl(cmd.route.base_url, `/v1beta/models/${encodeURIComponent(cmd.route.upstream_model)}:${method}`),
      headers,
      body,
    };
  }

  parseResponse(body: unknown, headers: Record<string, string | string[] | undefined>): ParsedResponse {
    const b = asRecord(body) ?? {};
    const candidates = Array.isArray(b.candidates) ? b.candidates : [];
    const grounding = new GroundingEvidence();
    grounding.add(b);
    return {
      providerRequestId: typeof b.responseId === 'string' ? b.responseId : headerValue(headers, 'x-request-id'),
      candidates: candidates.map((c, i) => toCandidate(asRecord(c) ?? {}, i)),
      promptBlockReason: blockReason(b),
      usage: parseUsage(b.usageMetadata),
      serviceTier: null,
      featureCalls: grounding.calls(),
    };
  }

  streamAccumulator(headers: Record<string, string | string[] | undefined>): StreamAccumulator {
    const byIndex = new Map<number, { finishReason: string | null; hasContent: boolean; textBytes: number; tokenCount?: number }>();
    let latestUsage: ParsedUsage | null = null;
    let id: string | null = headerValue(headers, 'x-request-id');
    let block: string | null = null;
    const grounding = new GroundingEvidence();
    const finalUsage = (): ParsedUsage | null => {
      if (!latestUsage) return null;
      if (block) return latestUsage;
      const all = [...byIndex.values()];
      return all.length > 0 && all.every((e) => e.finishReason !== null) ? latestUsage : null;
    };
    return {
      push(data: string): boolean {
        const chunk = asRecord(safeJson(data));
        if (!chunk) return true;
        if (typeof chunk.responseId === 'string') id = chunk.responseId;
        block = blockReason(chunk) ?? block;
        grounding.add(chunk);
        for (const raw of Array.isArray(chunk.candidates) ? chunk.candidates : []) {
          const c = toCandidate(asRecord(raw) ?? {}, 0);
          if (!takesCandidate(byIndex, c.index)) continue;
          const entry = byIndex.get(c.index) ?? { finishReason: null, hasContent: false, textBytes: 0 };
          entry.hasContent ||= c.hasContent;
          entry.finishReason = c.finishReason ?? entry.finishReason;
          entry.textBytes += c.textBytes ?? 0;
          // a candidate's tokenCount, when sent on a chunk, is its running total
          if (c.tokenCount != null) entry.tokenCount = c.tokenCount;
          byIndex.set(c.index, entry);
        }
        // Gemini repeats usageMetadata on chunks (often prompt-only); keep the latest, and count
        // it as final only once every candidate seen has finished (or the prompt was blocked).
        const u = parseUsage(chunk.usageMetadata);
        if (u) latestUsage = u;
        return true;
      },
      result(): ParsedResponse {
        return {
          providerRequestId: id,
          candidates: [...byIndex.entries()].sort(([a], [b]) => a - b).map(([index, e]) => ({ index, ...e })),
          promptBlockReason: block,
          usage: finalUsage(),
          serviceTier: null,
          featureCalls: grounding.calls(),
        };
      },
      get sawUsage() {
        return finalUsage() !== null;
      },
      get finished() {
        return finalUsage() !== null;
      },
    };
  }

  errorCode(body: unknown): string | null {
    const err = asRecord(asRecord(body)?.error);
    return typeof err?.status === 'string' ? err.status : null;
  }
}

function blockReason(b: Record<string, unknown>): string | null {
  const r = asRecord(b.promptFeedback)?.blockReason;
  return typeof r === 'string' ? r : null;
}

function toCandidate(c: Record<string, unknown>, fallbackIndex: number): ParsedCandidate {
  const parts = asRecord(c.content)?.parts;
  const hasContent =
    Array.isArray(parts) &&
    parts.some((p) => {
      const part = asRecord(p);
      // Thought summaries (`thought: true`) are reasoning, not an answer.
      if (part?.thought === true) return false;
      // generated media (image, speech) comes as inline data
      return (
        (typeof part?.text === 'string' && part.text.length > 0) || part?.functionCall !== undefined || asRecord(part?.inlineData) !== null
      );
    });
  return {
    index: typeof c.index === 'number' ? c.index : fallbackIndex,
    finishReason: typeof c.finishReason === 'string' ? c.finishReason : null,
    hasContent,
    textBytes: Array.isArray(parts) ? parts.reduce((sum: number, p) => sum + partBytes(asRecord(p)), 0) : 0,
    ...(typeof c.tokenCount === 'number' ? { tokenCount: nonNegInt(c.tokenCount) } : {}),
  };
}

/**
 * Bytes the model generated in one part: text (thought summaries included: thoughts are billed
 * output too) and function calls (name and arguments). A count for the usage floor, never kept.
 */
function partBytes(part: Record<string, unknown> | null): number {
  if (!part) return 0;
  let bytes = typeof part.text === 'string' ? generatedTextBytes(part.text) : 0;
  const call = asRecord(part.functionCall);
  if (call) bytes += generatedTextBytes(`${typeof call.name === 'string' ? call.name : ''}${JSON.stringify(call.args ?? {})}`);
  return bytes;
}

/**
 * Grounding fees a response evidences, gathered over its candidates (and a stream's chunks).
 * Search grounding is billed per grounded prompt on Gemini 1.x/2.x and per executed search query
 * from Gemini 3 on (distinct non-empty `webSearchQueries`; at least one when the response was
 * grounded at all); the response's `modelVersion` tells which, and an unknown one is counted per
 * query. Maps grounding is one per grounded prompt.
 */
class GroundingEvidence {
  private searched = false;
  private mapped = false;
  private readonly queries = new DistinctCount();
  private modelVersion: string | null = null;

  add(b: Record<string, unknown>): void {
    if (typeof b.modelVersion === 'string') this.modelVersion = b.modelVersion;
    for (const raw of Array.isArray(b.candidates) ? b.candidates : []) {
      const g = asRecord(asRecord(raw)?.groundingMetadata);
      if (!g) continue;
      const queries = Array.isArray(g.webSearchQueries) ? g.webSearchQueries : [];
      for (const q of queries) if (typeof q === 'string' && q.trim() !== '') this.queries.add(q);
      if (queries.length > 0 || asRecord(g.searchEntryPoint)) this.searched = true;
      const chunks = Array.isArray(g.groundingChunks) ? g.groundingChunks : [];
      if (typeof g.googleMapsWidgetContextToken === 'string' || chunks.some((c) => asRecord(asRecord(c)?.maps))) this.mapped = true;
    }
  }

  calls(): FeatureCalls {
    const calls: FeatureCalls = {};
    if (this.searched) calls.search_grounding = this.perPrompt() ? 1 : Math.max(1, this.queries.size);
    if (this.mapped) calls.maps_grounding = 1;
    return calls;
  }

  private perPrompt(): boolean {
    return this.modelVersion !== null && /^(models\/)?gemini-[12](\.|-)/.test(this.modelVersion);
  }
}

const KNOWN_USAGE = [
  'promptTokenCount',
  'candidatesTokenCount',
  'totalTokenCount',
  'cachedContentTokenCount',
  'thoughtsTokenCount',
  'toolUsePromptTokenCount',
  // per-modality breakdowns of the counts above (subsets, not extra tokens)
  'promptTokensDetails',
  'candidatesTokensDetails',
  'cacheTokensDetails',
  'toolUsePromptTokensDetails',
  'trafficType',
];

/**
 * candidatesTokenCount is summed over candidates; thoughtsTokenCount is reported separately, so
 * the aggregate output is their sum. Cached tokens are a subset of promptTokenCount. Tool-use
 * prompt tokens (what grounding or code execution fed back to the model) are billed as input but
 * reported outside promptTokenCount, so they are added to it.
 */
function parseUsage(raw: unknown): ParsedUsage | null {
  const u = asRecord(raw);
  if (!u || typeof u.promptTokenCount !== 'number') return null;
  if (!countsReadable(u, ['promptTokenCount', 'candidatesTokenCount', 'thoughtsTokenCount', 'toolUsePromptTokenCount', 'totalTokenCount']))
    return null;
  const thoughts = nonNegInt(u.thoughtsTokenCount);
  const usage = reconcileWithTotal(
    {
      inputTokens: nonNegInt(u.promptTokenCount) + nonNegInt(u.toolUsePromptTokenCount),
      cachedInputTokens: nonNegInt(u.cachedContentTokenCount),
      // explicit caches are created (and billed) by their own call, never by generateContent
      cacheWriteInputTokens: 0,
      audioInputTokens: modalityTokens(u.promptTokensDetails, 'AUDIO'),
      outputTokensTotal: nonNegInt(u.candidatesTokenCount) + thoughts,
      reasoningTokens: thoughts,
      audioOutputTokens: modalityTokens(u.candidatesTokensDetails, 'AUDIO'),
      imageOutputTokens: modalityTokens(u.candidatesTokensDetails, 'IMAGE'),
      unknownFields: unknownUsageFields(u, KNOWN_USAGE),
    },
    u.totalTokenCount,
  );
  return checkSubsets(usage);
}

/** The tokens of one modality in a `ModalityTokenCount[]` breakdown (entries summed). */
function modalityTokens(details: unknown, modality: 'AUDIO' | 'IMAGE'): number {
  if (!Array.isArray(details)) return 0;
  return details.reduce((sum: number, d) => {
    const entry = asRecord(d);
    return entry?.modality === modality ? sum + nonNegInt(entry.tokenCount) : sum;
  }, 0);
}
