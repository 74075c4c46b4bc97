import { Injectable } from '@nestjs/common';
import { DomainError, estimateRequestInputTokens, normaliseRequest } from '@gateway/domain';
import { fromGeminiGenerate } from '../admit-request/admit-request.command';
import { ListModels } from '../list-models/list-models.usecase';

/**
 * Gemini `countTokens`, answered by the gateway itself: the same conservative input estimate a
 * reservation is sized with (libs/domain `estimateRequestInputTokens`, with the route's per-media
 * minimums), in Gemini's `{ totalTokens }` shape. Authenticated like any call, but nothing is
 * reserved, recorded, billed or sent upstream. The estimate is an upper bound of what the
 * provider would count, not the provider's own number.
 */
@Injectable()
export class CountTokens {
  constructor(private readonly models: ListModels) {}

  async execute(credential: string | null, alias: string, raw: unknown): Promise<{ totalTokens: number }> {
    const { route } = await this.models.one(credential, 'gemini-generate', alias);
    // Gemini takes either `contents` (and friends) or a whole `generateContentRequest`.
    const wrapped = raw !== null && typeof raw === 'object' && 'generateContentRequest' in raw;
    const request = wrapped ? (raw as { generateContentRequest: unknown }).generateContentRequest : raw;
    const { body } = fromGeminiGenerate(request, alias, false, credential, null);
    const shape = normaliseRequest(body, 'gemini-generate', { candidateParam: route.candidateParam, outputCapParam: route.outputCapParam });
    if (!shape.ok) throw new DomainError(shape.code, shape.message, shape.param);
    const estimate = estimateRequestInputTokens(shape.body, 'gemini-generate', route.mediaInputTokens);
    if (!estimate.ok) throw new DomainError(estimate.code, estimate.message, estimate.param);
    return { totalTokens: estimate.tokens };
  }
}
