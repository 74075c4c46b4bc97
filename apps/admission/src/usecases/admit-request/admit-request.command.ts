import { z } from 'zod';
import { DomainError } from '@gateway/domain';
import type { ApiKind } from '@gateway/contracts';

/**
 * The normalised form of an incoming generation request, built from either API dialect. It
 * validates itself on creation, so both HTTP dialects share one admission path.
 */
export interface AdmitRequestCommand {
  apiKind: ApiKind;
  credential: string | null;
  idempotencyKey: string | null;
  modelAlias: string;
  stream: boolean;
  /** how a stream is framed for the client: SSE, or (Gemini without `alt=sse`) a JSON array */
  streamFormat: 'sse' | 'json-array';
  /** raw candidate-count field as sent (undefined when omitted): the domain validates it */
  requestedCandidates: unknown;
  candidateParamName: 'n' | 'candidateCount';
  requestedOutputCap: number | null;
  includeUsageForClient: boolean;
  /** texts only to estimate input tokens; never stored */
  promptTexts: string[];
  messageCount: number;
  body: Record<string, unknown>;
}

const content = z.union([z.string(), z.array(z.record(z.string(), z.unknown())), z.null()]);
const chatMessage = z.object({ role: z.string().min(1), content: content.optional() }).passthrough();
const positiveInt = z.number().int().min(1);

/** OpenAI chat-completions body: the fields the gateway reads are typed strictly. */
export const openAiChatBody = z
  .object({
    model: z.string().min(1),
    messages: z.array(chatMessage).min(1),
    n: z.unknown().optional(),
    max_tokens: positiveInt.nullable().optional(),
    max_completion_tokens: positiveInt.nullable().optional(),
    stream: z.boolean().nullable().optional(),
    stream_options: z.object({ include_usage: z.boolean().optional() }).passthrough().nullable().optional(),
  })
  .passthrough();

export function fromOpenAiChat(raw: unknown, credential: string | null, idempotencyKey: string | null): AdmitRequestCommand {
  const parsed = openAiChatBody.safeParse(raw);
  if (!parsed.success) throw invalid(parsed.error);
  const body = parsed.data;
  const texts: string[] = [];
  for (const m of body.messages) collectTexts(m.content, texts);
  const cap = body.max_completion_tokens ?? body.max_tokens ?? null;
  return {
    apiKind: 'openai-chat',
    credential,
    idempotencyKey,
    modelAlias: body.model,
    stream: body.stream === true,
    streamFormat: 'sse',
    requestedCandidates: body.n,
    candidateParamName: 'n',
    requestedOutputCap: cap,
    includeUsageForClient: body.stream_options?.include_usage === true,
    promptTexts: texts,
    messageCount: body.messages.length,
    body: body as Record<string, unknown>,
  };
}

const geminiPart = z.object({ text: z.string().optional() }).passthrough();
export const geminiGenerateBody = z
  .object({
    contents: z.array(z.object({ role: z.string().optional(), parts: z.array(geminiPart) }).passthrough()).min(1),
    systemInstruction: z
      .object({ parts: z.array(geminiPart) })
      .passthrough()
      .optional(),
    generationConfig: z
      .object({ candidateCount: z.unknown().optional(), maxOutputTokens: positiveInt.optional() })
      .passthrough()
      .optional(),
  })
  .passthrough();

export function fromGeminiGenerate(
  raw: unknown,
  modelAlias: string,
  stream: boolean,
  credential: string | null,
  idempotencyKey: string | null,
  streamFormat: 'sse' | 'json-array' = 'sse',
): AdmitRequestCommand {
  const parsed = geminiGenerateBody.safeParse(raw);
  if (!parsed.success) throw invalid(parsed.error);
  const body = parsed.data;
  const texts: string[] = [];
  for (const c of body.contents) for (const p of c.parts) if (p.text) texts.push(p.text);
  for (const p of body.systemInstruction?.parts ?? []) if (p.text) texts.push(p.text);
  return {
    apiKind: 'gemini-generate',
    credential,
    idempotencyKey,
    modelAlias,
    stream,
    streamFormat,
    requestedCandidates: body.generationConfig?.candidateCount,
    candidateParamName: 'candidateCount',
    requestedOutputCap: body.generationConfig?.maxOutputTokens ?? null,
    includeUsageForClient: true,
    promptTexts: texts,
    messageCount: body.contents.length,
    body: body as Record<string, unknown>,
  };
}

function collectTexts(c: unknown, out: string[]): void {
  if (typeof c === 'string') out.push(c);
  else if (Array.isArray(c)) for (const part of c) if (part && typeof part.text === 'string') out.push(part.text);
}

function invalid(error: z.ZodError): DomainError {
  const issue = error.issues[0];
  const path = issue?.path.join('.') || null;
  return new DomainError(
    'invalid_request',
    `invalid request body${path ? ` at ${path}` : ''}: ${issue?.message ?? 'malformed'}`,
    path ?? undefined,
  );
}
