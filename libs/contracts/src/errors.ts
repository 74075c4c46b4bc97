import { z } from 'zod';

/** OpenAI-compatible error body, used by every HTTP API of the gateway. */
export const openAiErrorBody = z.object({
  error: z.object({
    message: z.string(),
    type: z.string(),
    code: z.string(),
    param: z.string().nullable(),
  }),
});
export type OpenAiErrorBody = z.infer<typeof openAiErrorBody>;

/** Gemini-compatible error body; `status` carries the gateway's stable code. */
export const geminiErrorBody = z.object({
  error: z.object({
    code: z.number().int(),
    message: z.string(),
    status: z.string(),
    details: z.array(z.record(z.string(), z.unknown())),
  }),
});
export type GeminiErrorBody = z.infer<typeof geminiErrorBody>;
