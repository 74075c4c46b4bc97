import { z } from 'zod';
import { DomainError, normaliseRequest, RequestDialect } from '@gateway/domain';
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
  /**
   * The candidate count as sent in any of the dialect's spellings (undefined when omitted), for
   * the decision event of refusals that come before the route is known. The use case reads the
   * count again with the route contract's spellings; that reading is the one that is reserved.
   */
  requestedCandidates: unknown;
  includeUsageForClient: boolean;
  /** the body as sent (content: never stored); admission normalises it against the route contract */
  body: Record<string, unknown>;
  /** the x-gateway-workflow-id header as sent (checked by admission; only its hash is recorded) */
  workflowId?: string | null;
}

/** Reads the count with the dialect's own spellings, before a route contract adds its own. */
function preRead(body: Record<string, unknown>, dialect: RequestDialect): unknown {
  const n = normaliseRequest(body, dialect, {
    candidateParam: null,
    outputCapParam:
      dialect === 'gemini-generate' ? 'maxOutputTokens' : dialect === 'openai-responses' ? 'max_output_tokens' : 'max_completion_tokens',
  });
  if (!n.ok) throw new DomainError(n.code, n.message, n.param);
  return n.requestedCandidates;
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
  const body = parsed.data as Record<string, unknown>;
  return {
    apiKind: 'openai-chat',
    credential,
    idempotencyKey,
    modelAlias: parsed.data.model,
    stream: parsed.data.stream === true,
    streamFormat: 'sse',
    requestedCandidates: preRead(body, 'openai-chat'),
    includeUsageForClient: parsed.data.stream_options?.include_usage === true,
    body,
  };
}

/**
 * OpenAI Responses body. `input` is a string or a list of items; the fields admission decides on
 * (the cap, streaming, background, stored state, storage, tier, tools) are typed strictly, the
 * rest passes through. Background, stored state and storage are judged by the use case, so their
 * refusals carry their own codes and a decision event.
 */
export const openAiResponsesBody = z
  .object({
    model: z.string().min(1),
    input: z.union([z.string(), z.array(z.record(z.string(), z.unknown()))]).optional(),
    instructions: z.string().nullable().optional(),
    max_output_tokens: positiveInt.nullable().optional(),
    stream: z.boolean().nullable().optional(),
    background: z.boolean().nullable().optional(),
    store: z.boolean().nullable().optional(),
    previous_response_id: z.string().nullable().optional(),
    service_tier: z.string().nullable().optional(),
    tools: z.array(z.record(z.string(), z.unknown())).nullable().optional(),
  })
  .passthrough();

export function fromOpenAiResponses(raw: unknown, credential: string | null, idempotencyKey: string | null): AdmitRequestCommand {
  const parsed = openAiResponsesBody.safeParse(raw);
  if (!parsed.success) throw invalid(parsed.error);
  const body = parsed.data as Record<string, unknown>;
  return {
    apiKind: 'openai-responses',
    credential,
    idempotencyKey,
    modelAlias: parsed.data.model,
    stream: parsed.data.stream === true,
    streamFormat: 'sse',
    requestedCandidates: preRead(body, 'openai-responses'),
    // the usage is part of the response object (and of the stream's response.completed)
    includeUsageForClient: true,
    body,
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
  const body = parsed.data as Record<string, unknown>;
  return {
    apiKind: 'gemini-generate',
    credential,
    idempotencyKey,
    modelAlias,
    stream,
    streamFormat,
    requestedCandidates: preRead(body, 'gemini-generate'),
    includeUsageForClient: true,
    body,
  };
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
