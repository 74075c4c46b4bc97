// POST /v1beta/models/{model}:generateContent and :streamGenerateContent (SSE with ?alt=sse, else a JSON array).
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
import { geminiGrounding, geminiMediaAsked } from './billing-detail';
import { interleave, planResponse, type SimCandidate, type SimFinish, type SimPlan } from './simulate';
import type { SimScript } from './script';
import { estimatePromptTokens } from './text';

export const GEMINI_PATH = /^\/(v1beta|v1)\/models\/([^/]+):(generateContent|streamGenerateContent)$/;

/** Words per streamed text piece (Gemini streams larger pieces than OpenAI). */
const WORDS_PER_CHUNK = 5;

const FINISH: Record<SimFinish, string> = { stop: 'STOP', length: 'MAX_TOKENS', filter: 'SAFETY' };

const STATUS: Record<number, string> = {
  400: 'INVALID_ARGUMENT',
  401: 'UNAUTHENTICATED',
  403: 'PERMISSION_DENIED',
  404: 'NOT_FOUND',
  409: 'ABORTED',
  413: 'INVALID_ARGUMENT',
  429: 'RESOURCE_EXHAUSTED',
  499: 'CANCELLED',
  500: 'INTERNAL',
  501: 'UNIMPLEMENTED',
  503: 'UNAVAILABLE',
  504: 'DEADLINE_EXCEEDED',
};

const SAFETY_BLOCKED = [
  { category: 'HARM_CATEGORY_SEXUALLY_EXPLICIT', probability: 'NEGLIGIBLE' },
  { category: 'HARM_CATEGORY_HATE_SPEECH', probability: 'NEGLIGIBLE' },
  { category: 'HARM_CATEGORY_HARASSMENT', probability: 'NEGLIGIBLE' },
  { category: 'HARM_CATEGORY_DANGEROUS_CONTENT', probability: 'HIGH', blocked: true },
];

function modelFromPath(url: URL): string {
  const raw = GEMINI_PATH.exec(url.pathname)?.[2] ?? '';
  try {
    return decodeURIComponent(raw);
  } catch {
    return raw;
  }
}

function contentText(content: unknown): string {
  const parts = (content as { parts?: unknown })?.parts;
  if (!Array.isArray(parts)) return '';
  return parts.map((p) => (typeof p?.text === 'string' ? p.text : '')).join('');
}

function textChars(content: unknown): number {
  return contentText(content).length;
}

/** Usage as Gemini reports it; the modality breakdowns only when audio or images are involved. */
export function geminiUsage(plan: SimPlan, script: SimScript) {
  const media = plan.audioOutputTokens + plan.imageOutputTokens;
  const modality = (entries: [string, number][]) =>
    entries.filter(([, n]) => n > 0).map(([m, tokenCount]) => ({ modality: m, tokenCount }));
  return {
    promptTokenCount: plan.promptTokens,
    candidatesTokenCount: plan.outputTokens,
    totalTokenCount: plan.promptTokens + plan.outputTokens + plan.reasoningTokens,
    ...(script.cached ? { cachedContentTokenCount: plan.cachedTokens } : {}),
    ...(script.reasoning ? { thoughtsTokenCount: plan.reasoningTokens } : {}),
    ...(plan.audioInputTokens
      ? {
          promptTokensDetails: modality([
            ['TEXT', plan.promptTokens - plan.audioInputTokens],
            ['AUDIO', plan.audioInputTokens],
          ]),
        }
      : {}),
    ...(media
      ? {
          candidatesTokensDetails: modality([
            ['TEXT', plan.outputTokens - media],
            ['AUDIO', plan.audioOutputTokens],
            ['IMAGE', plan.imageOutputTokens],
          ]),
        }
      : {}),
  };
}

/** Stand-ins for generated media (a 1x1 PNG, a few PCM samples); never decoded. */
const SIM_IMAGE_B64 = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==';
const SIM_PCM_B64 = 'AAABAAIAAwAEAAUABgAHAAgACQ==';

/** What the final piece of a candidate adds: its generated media, and the grounding of a grounded answer. */
interface Extras {
  grounding: { search: boolean; maps: boolean };
  searches: number;
}

function mediaParts(c: SimCandidate): object[] {
  return [
    ...(c.imageTokens > 0 ? [{ inlineData: { mimeType: 'image/png', data: SIM_IMAGE_B64 } }] : []),
    ...(c.audioTokens > 0 ? [{ inlineData: { mimeType: 'audio/L16;codec=pcm;rate=24000', data: SIM_PCM_B64 } }] : []),
  ];
}

/** Grounding metadata as Gemini attaches it to a grounded candidate: `searches` distinct queries, a maps source. */
function groundingMetadata(extras: Extras): object | null {
  const { search, maps } = extras.grounding;
  if (!search && !maps) return null;
  return {
    ...(search
      ? {
          webSearchQueries: Array.from({ length: extras.searches }, (_, k) => `sim query ${k + 1}`),
          searchEntryPoint: { renderedContent: '<div class="sim-search"></div>' },
        }
      : {}),
    groundingChunks: [
      ...(search ? [{ web: { uri: 'https://sim.example/source', title: 'sim.example' } }] : []),
      ...(maps ? [{ maps: { uri: 'https://maps.sim.example/place', title: 'Sim Place', placeId: 'places/sim' } }] : []),
    ],
    ...(maps ? { googleMapsWidgetContextToken: 'widgetcontent/sim' } : {}),
  };
}

/** A candidate (or one streamed piece of it). `last` pieces carry the finishReason, media and grounding. */
function candidate(c: SimCandidate, text: string | null, last: boolean, extras: Extras) {
  if (c.finish === 'filter') return { finishReason: 'SAFETY', index: c.index, safetyRatings: SAFETY_BLOCKED };
  const parts = [...(text === null ? [] : [{ text }]), ...(last ? mediaParts(c) : [])];
  const grounding = last ? groundingMetadata(extras) : null;
  return {
    content: parts.length === 0 ? { role: 'model' } : { parts, role: 'model' },
    ...(last ? { finishReason: FINISH[c.finish] } : {}),
    index: c.index,
    ...(grounding ? { groundingMetadata: grounding } : {}),
  };
}

function pieces(c: SimCandidate): { text: string | null; last: boolean }[] {
  if (c.finish === 'filter' || c.words.length === 0) return [{ text: null, last: true }];
  const out: { text: string | null; last: boolean }[] = [];
  for (let i = 0; i < c.words.length; i += WORDS_PER_CHUNK) {
    const text = c.words.slice(i, i + WORDS_PER_CHUNK).join(' ');
    out.push({ text: i ? ` ${text}` : text, last: i + WORDS_PER_CHUNK >= c.words.length });
  }
  return out;
}

function adapter(stream: boolean): ProviderAdapter {
  return {
    provider: 'gemini',
    endpoint: stream ? 'gemini.stream_generate_content' : 'gemini.generate_content',

    errorBody(status: number, message: string, _detail?: ErrorDetail) {
      return { error: { code: status, message, status: STATUS[status] ?? (status >= 500 ? 'INTERNAL' : 'FAILED_PRECONDITION') } };
    },

    parse(body: unknown, url: URL) {
      if (!body || typeof body !== 'object' || Array.isArray(body)) throw new InvalidRequest('Invalid JSON payload: expected an object.');
      const b = body as Record<string, unknown>;
      if (!Array.isArray(b.contents)) throw new InvalidRequest('* GenerateContentRequest.contents: contents is not specified');
      // Like Gemini itself, proto field names are accepted as well as lowerCamel.
      const config = { ...((b.generation_config ?? {}) as object), ...((b.generationConfig ?? {}) as object) } as Record<string, unknown>;
      const lengths = b.contents.map(textChars);
      const system = b.systemInstruction ?? b.system_instruction;
      if (system) lengths.push(textChars(system));
      return {
        modelSpec: modelFromPath(url),
        asked: optionalCount(
          config.candidateCount ?? config.candidate_count,
          'candidateCount',
          `* GenerationConfig.candidateCount: must be between 1 and ${MAX_CANDIDATES}`,
          null,
          MAX_CANDIDATES,
        ),
        cap: optionalCount(
          config.maxOutputTokens ?? config.max_output_tokens,
          'maxOutputTokens',
          '* GenerationConfig.maxOutputTokens: must be a positive integer',
        ),
        stream,
        promptTokens: estimatePromptTokens(lengths),
        lastText: contentText(b.contents[b.contents.length - 1]),
      };
    },

    plan(src: PlanSource) {
      const { parsed, resolved, ctx, fingerprint, body } = src;
      return planResponse({ ...parsed, seed: ctx.seed, fingerprint, script: resolved.script, media: geminiMediaAsked(body) });
    },

    async respond(ex: Exchange) {
      const { script, model } = ex.resolved;
      const { parsed } = ex;
      if (script.rejectN && (parsed.asked ?? 1) > 1) {
        return ex.fail(
          400,
          `* GenerationConfig.candidateCount: multiple candidates are not supported by ${model}; candidateCount must be 1 (got ${parsed.asked}).`,
        );
      }
      const meta = { modelVersion: model, responseId: script.hostileFields ? hostileId(ex.id) : `simresp${ex.id}` };
      ex.entry.providerRequestId = meta.responseId;
      const sseMode = ex.url.searchParams.get('alt') === 'sse';

      if (script.block) {
        const blocked = {
          promptFeedback: { blockReason: 'SAFETY', safetyRatings: SAFETY_BLOCKED },
          ...(script.noUsage ? {} : { usageMetadata: { promptTokenCount: parsed.promptTokens, totalTokenCount: parsed.promptTokens } }),
          ...meta,
        };
        if (!stream) return sendJson(ex.res, 200, blocked);
        return sendStream(
          ex,
          sseMode ? 'text/event-stream' : 'application/json',
          sseMode ? sse(blocked) : `[${JSON.stringify(blocked)}]`,
          '',
        );
      }

      const { plan } = ex;
      const usage = script.noUsage
        ? {}
        : { usageMetadata: { ...geminiUsage(plan, script), ...(script.hostileFields ? HOSTILE_USAGE : {}) } };
      const extras: Extras = { grounding: geminiGrounding(ex.body), searches: script.searches };
      if (!stream) {
        const candidates = plan.candidates.map((c) => candidate(c, c.words.length ? c.words.join(' ') : null, true, extras));
        return sendJson(ex.res, 200, { candidates, ...usage, ...meta });
      }

      const chunks = interleave(
        plan.candidates.map((c) => pieces(c).map((p) => ({ candidates: [candidate(c, p.text, p.last, extras)], ...meta }))),
      );
      const final = script.noUsage ? null : { ...usage, ...meta };
      if (sseMode) {
        return sendStream(ex, 'text/event-stream', chunks.map(sse).join(''), final ? sse(final) : '');
      }
      const content = '[' + chunks.map((c) => JSON.stringify(c)).join(',\r\n');
      const tail = (final ? (chunks.length ? ',\r\n' : '') + JSON.stringify(final) : '') + ']';
      return sendStream(ex, 'application/json', content, tail);
    },
  };
}

/** `hostile-fields`: an id with a NUL, longer than an index entry can be. */
function hostileId(id: number | string): string {
  return `simresp${id}\u0000${'x'.repeat(3000)}`;
}

/** `hostile-fields`: 40 usage fields no adapter knows, each with a 150-character name. */
const HOSTILE_USAGE: Record<string, number> = Object.fromEntries(
  Array.from({ length: 40 }, (_, i) => [`hostileField${String(i).padStart(2, '0')}${'y'.repeat(136)}`, 1]),
);

export const geminiGenerate = adapter(false);
export const geminiStream = adapter(true);
