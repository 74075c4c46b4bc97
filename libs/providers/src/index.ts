/**
 * @gateway/providers: one adapter per provider kind. Each writes the candidate count and output
 * cap the route contract names, and reads counts, finish reasons and aggregate usage — never
 * content — from whole responses and streams.
 */
import type { ProviderKind } from '@gateway/contracts';
import { ProviderAdapter } from './adapter';
import { GeminiGenerateAdapter } from './gemini-generate.adapter';
import { OpenAiChatAdapter } from './openai-chat.adapter';

export * from './adapter';
export * from './credentials';
export { OpenAiChatAdapter } from './openai-chat.adapter';
export { GeminiGenerateAdapter } from './gemini-generate.adapter';
export * from './sse';
export * from './upstream-agent';

export function adapterFor(kind: ProviderKind): ProviderAdapter {
  switch (kind) {
    case 'openai-chat':
    case 'openai-compatible':
      return new OpenAiChatAdapter();
    case 'gemini-generate':
      return new GeminiGenerateAdapter();
  }
}
