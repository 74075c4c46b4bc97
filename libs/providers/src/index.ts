/**
 * @gateway/providers: one adapter per provider kind. Each writes the candidate count and output
 * cap the route contract names, and reads counts, finish reasons and aggregate usage — never
 * content — from whole responses and streams.
 */
import type { ApiKind, ProviderKind } from '@gateway/contracts';
import { ProviderAdapter } from './adapter';
import { boundedAdapter } from './bounded';
import { GeminiGenerateAdapter } from './gemini-generate.adapter';
import { OpenAiChatAdapter } from './openai-chat.adapter';
import { OpenAiResponsesAdapter } from './openai-responses.adapter';

export * from './adapter';
export * from './billed-extras';
export { AnswerTooLarge, boundedResponse, readBounded, UNRECOGNISED_REASON } from './bounded';
export * from './credentials';
export { OpenAiChatAdapter } from './openai-chat.adapter';
export { GeminiGenerateAdapter } from './gemini-generate.adapter';
export { OpenAiResponsesAdapter } from './openai-responses.adapter';
export * from './sse';
export * from './upstream-agent';

/** The adapter of a provider kind, its answers bounded to what the evidence takes (`boundedAdapter`). */
export function adapterFor(kind: ProviderKind): ProviderAdapter {
  return boundedAdapter(unboundedAdapterFor(kind));
}

/** The adapter for what a command asks: the Responses dialect has its own (on `openai-chat` routes). */
export function adapterForCommand(cmd: { api_kind: ApiKind; route: { provider_kind: ProviderKind } }): ProviderAdapter {
  return cmd.api_kind === 'openai-responses' ? boundedAdapter(new OpenAiResponsesAdapter()) : adapterFor(cmd.route.provider_kind);
}

function unboundedAdapterFor(kind: ProviderKind): ProviderAdapter {
  switch (kind) {
    case 'openai-chat':
    case 'openai-compatible':
      return new OpenAiChatAdapter();
    case 'gemini-generate':
      return new GeminiGenerateAdapter();
  }
}
