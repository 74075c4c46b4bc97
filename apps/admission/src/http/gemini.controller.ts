import { Controller, Headers, Param, Post, Req, Res } from '@nestjs/common';
import { ApiBody, ApiHeader, ApiOperation, ApiParam, ApiTags } from '@nestjs/swagger';
import type { Request, Response } from 'express';
import { DomainError } from '@gateway/domain';
import { fromGeminiGenerate } from '../usecases/admit-request/admit-request.command';
import { GenerationResponder } from './generation.responder';
import { googApiKey, workflowHeader } from './credentials';

@ApiTags('gemini-compatible')
@Controller('v1beta/models')
export class GeminiController {
  constructor(private readonly responder: GenerationResponder) {}

  @Post(':modelAndMethod')
  @ApiOperation({ summary: 'Gemini-compatible {model}:generateContent and {model}:streamGenerateContent' })
  @ApiParam({ name: 'modelAndMethod', example: 'gemini-flash:generateContent' })
  @ApiHeader({ name: 'x-goog-api-key', required: true })
  @ApiBody({ schema: { type: 'object', required: ['contents'] } })
  generate(
    @Param('modelAndMethod') modelAndMethod: string,
    @Req() req: Request,
    @Res() res: Response,
    @Headers('idempotency-key') idem?: string,
  ): Promise<void> {
    return this.responder.serve(
      () => {
        const sep = modelAndMethod.lastIndexOf(':');
        const model = sep > 0 ? modelAndMethod.slice(0, sep) : '';
        const method = sep > 0 ? modelAndMethod.slice(sep + 1) : '';
        if (method !== 'generateContent' && method !== 'streamGenerateContent') {
          throw new DomainError('invalid_request', `unsupported method '${method}'; use generateContent or streamGenerateContent`);
        }
        const format = req.query.alt === 'sse' ? 'sse' : 'json-array';
        return {
          ...fromGeminiGenerate(req.body, model, method === 'streamGenerateContent', googApiKey(req), idem ?? null, format),
          workflowId: workflowHeader(req),
        };
      },
      req,
      res,
    );
  }
}
