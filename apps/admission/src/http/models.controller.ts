import { Controller, Get, Param, Req } from '@nestjs/common';
import { ApiHeader, ApiOperation, ApiParam, ApiTags } from '@nestjs/swagger';
import type { Request } from 'express';
import { sendsGoogApiKey } from '@gateway/service-kit';
import { ListModels, ModelEntry } from '../usecases/list-models/list-models.usecase';
import { bearer, googApiKey } from './credentials';

/**
 * The model aliases the calling workload may use, in the shape of the SDK that asks.
 * `/v1beta/models` is Gemini's; `/v1/models` is both OpenAI's and Gemini's (`apiVersion: 'v1'`),
 * told apart by how the caller sends its key: `x-goog-api-key` (the Gemini SDK) gets Gemini's
 * `{ models: [...] }` of Gemini-kind routes, anything else (`Authorization: Bearer`, the OpenAI
 * SDK) OpenAI's `{ object: 'list', data: [...] }` of OpenAI-kind routes.
 */
@ApiTags('models')
@Controller()
export class ModelsController {
  constructor(private readonly models: ListModels) {}

  @Get('v1/models')
  @ApiOperation({
    summary: 'Model aliases this workload may use: OpenAI shape, or Gemini shape when the key comes in x-goog-api-key',
  })
  @ApiHeader({
    name: 'x-goog-api-key',
    required: false,
    description: 'present: Gemini shape; otherwise Authorization: Bearer and OpenAI shape',
  })
  async list(@Req() req: Request) {
    if (sendsGoogApiKey(req)) return this.geminiList(req);
    const entries = await this.models.execute(bearer(req), 'openai-chat');
    return { object: 'list', data: entries.map(openAiModel) };
  }

  @Get('v1/models/:model')
  @ApiOperation({ summary: 'One model alias: OpenAI shape, or Gemini shape when the key comes in x-goog-api-key' })
  @ApiParam({ name: 'model', example: 'approved-standard' })
  async get(@Param('model') id: string, @Req() req: Request) {
    if (sendsGoogApiKey(req)) return this.geminiOne(req, id);
    return openAiModel(await this.models.one(bearer(req), 'openai-chat', id));
  }

  @Get('v1beta/models')
  @ApiOperation({ summary: 'Gemini-shaped list of the model aliases this workload may use' })
  @ApiHeader({ name: 'x-goog-api-key', required: true })
  geminiList(@Req() req: Request) {
    return this.models.execute(googApiKey(req), 'gemini-generate').then((entries) => ({ models: entries.map(geminiModel) }));
  }

  @Get('v1beta/models/:model')
  @ApiOperation({ summary: 'One Gemini-shaped model alias' })
  @ApiParam({ name: 'model', example: 'gemini-flash' })
  @ApiHeader({ name: 'x-goog-api-key', required: true })
  async geminiOne(@Req() req: Request, @Param('model') name: string) {
    return geminiModel(await this.models.one(googApiKey(req), 'gemini-generate', name.replace(/^models\//, '')));
  }
}

function openAiModel(e: ModelEntry) {
  return { id: e.alias, object: 'model', created: Math.floor(e.route.routeCreatedAt.getTime() / 1000), owned_by: 'llm-gateway' };
}

/** Gemini's Model resource; limits are left out (the gateway's are per workload, not per model). */
function geminiModel(e: ModelEntry) {
  return {
    name: `models/${e.alias}`,
    baseModelId: e.alias,
    version: String(e.route.version),
    displayName: e.alias,
    description: `gateway route alias (route ${e.route.routeId}, contract version ${e.route.version})`,
    supportedGenerationMethods: ['generateContent', 'streamGenerateContent', 'countTokens'],
  };
}
