import { Controller, Headers, Post, Req, Res } from '@nestjs/common';
import { ApiBearerAuth, ApiBody, ApiOperation, ApiResponse, ApiTags } from '@nestjs/swagger';
import type { Request, Response } from 'express';
import { fromOpenAiResponses } from '../usecases/admit-request/admit-request.command';
import { GenerationFailureResponses, GenerationResponder, IdempotencyKeyHeader } from './generation.responder';
import { bearer, workflowHeader } from './credentials';

@ApiTags('openai-compatible')
@ApiBearerAuth()
@Controller('v1/responses')
export class ResponsesController {
  constructor(private readonly responder: GenerationResponder) {}

  @Post()
  @ApiOperation({
    summary:
      'OpenAI Responses API on openai-chat routes: one candidate, max_output_tokens is the reserved cap; background runs, stored state (previous_response_id, conversation) and store: true without allow_provider_storage are refused',
  })
  @IdempotencyKeyHeader()
  @ApiBody({
    schema: {
      type: 'object',
      required: ['model', 'input'],
      properties: {
        model: { type: 'string' },
        input: { oneOf: [{ type: 'string' }, { type: 'array', items: { type: 'object' } }] },
        instructions: { type: 'string' },
        max_output_tokens: { type: 'integer', minimum: 1 },
        stream: { type: 'boolean' },
        store: { type: 'boolean', description: 'true only on workloads with allow_provider_storage' },
        background: { type: 'boolean', enum: [false] },
        tools: { type: 'array', items: { type: 'object' } },
      },
    },
  })
  @ApiResponse({
    status: 200,
    description: 'provider-shaped response (or SSE events ending in response.completed) with x-gateway-* headers',
  })
  @ApiResponse({
    status: 400,
    description:
      'invalid_request | background_not_supported | stored_state_not_supported | provider_storage_not_allowed | unpriced_feature | unpriced_input',
  })
  @GenerationFailureResponses()
  create(@Req() req: Request, @Res() res: Response, @Headers('idempotency-key') idem?: string): Promise<void> {
    return this.responder.serve(
      () => ({ ...fromOpenAiResponses(req.body, bearer(req), idem ?? null), workflowId: workflowHeader(req) }),
      req,
      res,
    );
  }
}
