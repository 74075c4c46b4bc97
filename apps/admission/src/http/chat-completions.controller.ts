import { Controller, Headers, Post, Req, Res } from '@nestjs/common';
import { ApiBearerAuth, ApiBody, ApiHeader, ApiOperation, ApiResponse, ApiTags } from '@nestjs/swagger';
import type { Request, Response } from 'express';
import { fromOpenAiChat } from '../usecases/admit-request/admit-request.command';
import { GenerationFailureResponses, GenerationResponder, IdempotencyKeyHeader } from './generation.responder';
import { bearer, workflowHeader } from './credentials';

@ApiTags('openai-compatible')
@ApiBearerAuth()
@Controller('v1/chat/completions')
export class ChatCompletionsController {
  constructor(private readonly responder: GenerationResponder) {}

  @Post()
  @ApiOperation({ summary: 'OpenAI-compatible chat completions (n omitted → 1; over-policy n is refused before dispatch)' })
  @IdempotencyKeyHeader()
  @ApiHeader({
    name: 'x-gateway-workflow-id',
    required: false,
    description: 'workflow id for the fan-out limit (1–256 printable characters)',
  })
  @ApiBody({
    schema: {
      type: 'object',
      required: ['model', 'messages'],
      properties: {
        model: { type: 'string' },
        messages: { type: 'array', items: { type: 'object' } },
        n: { type: 'integer', minimum: 1 },
        max_tokens: { type: 'integer' },
        max_completion_tokens: { type: 'integer' },
        stream: { type: 'boolean' },
      },
    },
  })
  @ApiResponse({ status: 200, description: 'provider-shaped response with x-gateway-* headers' })
  @ApiResponse({ status: 400, description: 'candidate_count_exceeds_policy | candidate_count_without_sampling | invalid_request' })
  @GenerationFailureResponses()
  create(@Req() req: Request, @Res() res: Response, @Headers('idempotency-key') idem?: string): Promise<void> {
    return this.responder.serve(
      () => ({ ...fromOpenAiChat(req.body, bearer(req), idem ?? null), workflowId: workflowHeader(req) }),
      req,
      res,
    );
  }
}
