import { Body, Controller, Headers, Param, Post, Req, Res } from '@nestjs/common';
import { ApiBody, ApiHeader, ApiOperation, ApiParam, ApiTags } from '@nestjs/swagger';
import type { Request, Response } from 'express';
import { DomainError } from '@gateway/domain';
import { fromGeminiGenerate } from '../usecases/admit-request/admit-request.command';
import { CountTokens } from '../usecases/count-tokens/count-tokens.usecase';
import { GenerationFailureResponses, GenerationResponder, IdempotencyKeyHeader } from './generation.responder';
import { googApiKey, workflowHeader } from './credentials';

const METHODS = ['generateContent', 'streamGenerateContent', 'countTokens'] as const;

/**
 * Gemini's model methods, under both API versions Google serves them on: `/v1beta/models/…`
 * (what @google/genai calls by default) and `/v1/models/…` (`httpOptions.apiVersion: 'v1'`), with
 * the same semantics.
 */
@ApiTags('gemini-compatible')
@Controller()
export class GeminiController {
  constructor(
    private readonly responder: GenerationResponder,
    private readonly countTokens: CountTokens,
  ) {}

  @Post(['v1beta/models/:model', 'v1/models/:model'])
  @ApiOperation({
    summary:
      'Gemini-compatible {model}:generateContent, {model}:streamGenerateContent and {model}:countTokens (API versions v1beta and v1)',
    description:
      'countTokens answers the gateway\'s own conservative input estimate (the one reservations are sized with) as { "totalTokens": n }: no upstream call, nothing reserved or billed.',
  })
  @ApiParam({ name: 'model', description: 'alias and method', example: 'gemini-flash:generateContent' })
  @ApiHeader({ name: 'x-goog-api-key', required: true })
  @IdempotencyKeyHeader()
  @ApiBody({ schema: { type: 'object', required: ['contents'] } })
  @GenerationFailureResponses()
  async generate(
    @Param('model') modelAndMethod: string,
    @Req() req: Request,
    @Res() res: Response,
    @Body() body: unknown,
    @Headers('idempotency-key') idem?: string,
  ): Promise<void> {
    const sep = modelAndMethod.lastIndexOf(':');
    const model = sep > 0 ? modelAndMethod.slice(0, sep) : '';
    const method = sep > 0 ? modelAndMethod.slice(sep + 1) : '';
    if (method === 'countTokens') {
      // Refusals reach the one exception filter, which answers in Gemini's error shape.
      res.status(200).json(await this.countTokens.execute(googApiKey(req), model, body));
      return;
    }
    return this.responder.serve(
      () => {
        if (method !== 'generateContent' && method !== 'streamGenerateContent') {
          throw new DomainError('invalid_request', `unsupported method '${method}'; use ${METHODS.join(', ')}`);
        }
        const format = req.query.alt === 'sse' ? 'sse' : 'json-array';
        return {
          ...fromGeminiGenerate(body, model, method === 'streamGenerateContent', googApiKey(req), idem ?? null, format),
          workflowId: workflowHeader(req),
        };
      },
      req,
      res,
    );
  }
}
