/**
 * The input side of a reservation, from everything a request sends: text, tools and their
 * schemas, tool-call arguments, system instructions in either spelling, inline media. The
 * serialised body is the floor (ceil(UTF-8 bytes / 3), the same rate as text), so nothing the
 * provider reads is free; each media item adds the route contract's per-media minimum on top,
 * because providers bill an image or a clip by what it shows, not by its encoded size. What the
 * gateway cannot see (a remote file, cached content on the provider) cannot be estimated and is
 * refused as `unpriced_input`.
 */
import { RequestDialect, asRecord } from './request-shape';
import { estimateInputTokens } from './reservation';
import { assertNonNegativeInteger } from './validation';

export type MediaKind = 'image' | 'audio' | 'video' | 'document';
export const MEDIA_KINDS: readonly MediaKind[] = ['image', 'audio', 'video', 'document'];

/** Tokens added per media item (route contract; defaults cover the large end of known tariffs). */
export type MediaInputTokens = Readonly<Record<MediaKind, number>>;

/**
 * OpenAI bills a high-detail image up to ~1,100–1,600 tokens, Gemini 258 per 768-px tile; audio,
 * video and documents are billed by length, which their inline size (in the serialised floor)
 * already overstates, so their minimum covers the short end.
 */
export const DEFAULT_MEDIA_INPUT_TOKENS: MediaInputTokens = { image: 1600, audio: 1000, video: 3000, document: 2000 };

export type InputEstimate =
  { ok: true; tokens: number; media: Record<MediaKind, number> } | { ok: false; code: 'unpriced_input'; message: string; param: string };

export function estimateRequestInputTokens(
  body: Record<string, unknown>,
  dialect: RequestDialect,
  mediaTokens: MediaInputTokens = DEFAULT_MEDIA_INPUT_TOKENS,
): InputEstimate {
  for (const kind of MEDIA_KINDS) assertNonNegativeInteger(mediaTokens[kind], `mediaTokens.${kind}`);
  const scan = dialect === 'gemini-generate' ? scanGemini(body) : dialect === 'openai-responses' ? scanResponses(body) : scanOpenAi(body);
  if ('unpriced' in scan) {
    return {
      ok: false,
      code: 'unpriced_input',
      message: `${scan.unpriced.param}: ${scan.unpriced.why}; the route contract cannot price it, so the gateway cannot reserve for it`,
      param: scan.unpriced.param,
    };
  }
  // The whole serialised body at the text rate: every text is in it, and so is everything else.
  // `model` names the gateway's alias, which the adapter replaces; it is not input to the model.
  let tokens = estimateInputTokens([serialisedInput(body)], scan.messages);
  for (const kind of MEDIA_KINDS) tokens += scan.media[kind] * mediaTokens[kind];
  return { ok: true, tokens, media: scan.media };
}

/** The body as the estimate counts it: everything but the alias in `model`. */
export function serialisedInput(body: Record<string, unknown>): string {
  return JSON.stringify({ ...body, model: undefined });
}

type Scan = { messages: number; media: Record<MediaKind, number> } | { unpriced: { param: string; why: string } };

function emptyMedia(): Record<MediaKind, number> {
  return { image: 0, audio: 0, video: 0, document: 0 };
}

function scanOpenAi(body: Record<string, unknown>): Scan {
  const media = emptyMedia();
  const messages = Array.isArray(body.messages) ? body.messages : [];
  for (let i = 0; i < messages.length; i++) {
    const content = asRecord(messages[i])?.content;
    if (!Array.isArray(content)) continue;
    for (let j = 0; j < content.length; j++) {
      const part = asRecord(content[j]);
      switch (part?.type) {
        case 'image_url':
          media.image++;
          break;
        case 'input_audio':
          media.audio++;
          break;
        case 'file': {
          const file = asRecord(part.file);
          if (typeof file?.file_id === 'string' || typeof file?.file_data !== 'string') {
            return { unpriced: { param: `messages[${i}].content[${j}].file`, why: 'a file stored at the provider (file_id)' } };
          }
          media.document++;
          break;
        }
        default:
          break;
      }
    }
  }
  return { messages: messages.length, media };
}

/**
 * Responses API: `input` (a string, or items whose `content` holds `input_text`, `input_image`,
 * `input_audio`, `input_file` parts) plus `instructions`; tools and everything else are in the
 * serialised floor. A file or a prompt template stored at the provider cannot be seen.
 */
function scanResponses(body: Record<string, unknown>): Scan {
  if (body.prompt !== undefined && body.prompt !== null) {
    return { unpriced: { param: 'prompt', why: 'a prompt template stored at the provider' } };
  }
  const media = emptyMedia();
  const items = Array.isArray(body.input) ? body.input : [];
  for (let i = 0; i < items.length; i++) {
    const content = asRecord(items[i])?.content;
    if (!Array.isArray(content)) continue;
    for (let j = 0; j < content.length; j++) {
      const part = asRecord(content[j]);
      switch (part?.type) {
        case 'input_image':
          media.image++;
          break;
        case 'input_audio':
          media.audio++;
          break;
        case 'input_file':
          if (typeof part.file_data !== 'string') {
            return {
              unpriced: { param: `input[${i}].content[${j}]`, why: 'a file stored at the provider or behind a URL (file_id, file_url)' },
            };
          }
          media.document++;
          break;
        default:
          break;
      }
    }
  }
  const messages = (Array.isArray(body.input) ? items.length : 1) + (body.instructions ? 1 : 0);
  return { messages, media };
}

function scanGemini(body: Record<string, unknown>): Scan {
  for (const key of ['cachedContent', 'cached_content']) {
    if (body[key] !== undefined && body[key] !== null) {
      return { unpriced: { param: key, why: 'content cached at the provider' } };
    }
  }
  const media = emptyMedia();
  const contents = Array.isArray(body.contents) ? body.contents : [];
  const groups: { path: string; content: unknown }[] = contents.map((c, i) => ({ path: `contents[${i}]`, content: c }));
  let messages = contents.length;
  for (const key of ['systemInstruction', 'system_instruction']) {
    if (body[key] === undefined || body[key] === null) continue;
    groups.push({ path: key, content: body[key] });
    messages++;
  }
  for (const { path, content } of groups) {
    const parts = asRecord(content)?.parts;
    if (!Array.isArray(parts)) continue;
    for (let j = 0; j < parts.length; j++) {
      const part = asRecord(parts[j]) ?? {};
      for (const key of ['fileData', 'file_data']) {
        if (part[key] !== undefined && part[key] !== null) {
          return { unpriced: { param: `${path}.parts[${j}].${key}`, why: 'a remote file URI' } };
        }
      }
      for (const key of ['inlineData', 'inline_data']) {
        const inline = asRecord(part[key]);
        if (!inline) continue;
        const mime = inline.mimeType ?? inline.mime_type;
        media[mediaKindOf(typeof mime === 'string' ? mime : '')]++;
      }
    }
  }
  return { messages, media };
}

function mediaKindOf(mime: string): MediaKind {
  const type = mime.split('/')[0]?.toLowerCase();
  return type === 'image' ? 'image' : type === 'audio' ? 'audio' : type === 'video' ? 'video' : 'document';
}
