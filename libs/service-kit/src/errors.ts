import { ArgumentsHost, Catch, ExceptionFilter, HttpException } from '@nestjs/common';
import type { Request, Response } from 'express';
import { DenialCode, denialHttpStatus, denialShouldRetry, DomainError } from '@gateway/domain';

/** Extra response headers a denial wants (Retry-After for the 429s). */
export class GatewayError extends DomainError {
  constructor(
    code: DenialCode,
    message: string,
    param?: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(code, message, param);
  }
}

const GEMINI_STATUS: Record<number, string> = {
  400: 'INVALID_ARGUMENT',
  401: 'UNAUTHENTICATED',
  403: 'PERMISSION_DENIED',
  404: 'NOT_FOUND',
  409: 'ALREADY_EXISTS',
  429: 'RESOURCE_EXHAUSTED',
  502: 'UNAVAILABLE',
  504: 'DEADLINE_EXCEEDED',
};

/**
 * A denial's body in the caller's dialect: OpenAI's `{error:{message,type,code,param}}`, or for
 * the Gemini endpoints Gemini's `{error:{code,message,status,details}}` with our stable code in
 * `status` and in the details. Streams send the same body as their closing error event.
 */
export function denialBody(req: Pick<Request, 'path'>, err: DomainError): { error: Record<string, unknown> } {
  const status = denialHttpStatus(err.code);
  if (req.path.startsWith('/v1beta/')) {
    return {
      error: {
        code: status,
        message: err.message,
        status: err.code,
        details: [
          {
            '@type': 'type.googleapis.com/google.rpc.ErrorInfo',
            reason: err.code,
            domain: 'llm-gateway',
            metadata: { grpc_status: GEMINI_STATUS[status] ?? 'UNKNOWN' },
          },
        ],
      },
    };
  }
  return {
    error: { message: err.message, type: status >= 500 ? 'api_error' : 'invalid_request_error', code: err.code, param: err.param ?? null },
  };
}

/** What writeDenial needs of a response (an Express Response is one). */
export interface DenialTarget {
  setHeader(name: string, value: string): unknown;
  status(code: number): { json(body: unknown): unknown };
}

/** Writes a denial in the caller's dialect (see denialBody); always sets x-should-retry where the design says so. */
export function writeDenial(
  req: Pick<Request, 'path'>,
  res: DenialTarget,
  err: DomainError,
  extraHeaders: Record<string, string> = {},
): void {
  const retry = denialShouldRetry(err.code);
  if (retry !== null) res.setHeader('x-should-retry', String(retry));
  for (const [k, v] of Object.entries(extraHeaders)) res.setHeader(k, v);
  res.status(denialHttpStatus(err.code)).json(denialBody(req, err));
}

/** Maps every error to a stable shape; anything unexpected is a 500 without internals. */
@Catch()
export class GatewayExceptionFilter implements ExceptionFilter {
  constructor(private readonly log: { error(obj: object, msg?: string): void }) {}

  catch(exception: unknown, host: ArgumentsHost): void {
    const ctx = host.switchToHttp();
    const req = ctx.getRequest<Request>();
    const res = ctx.getResponse<Response>();
    if (res.headersSent) {
      res.end();
      return;
    }
    if (exception instanceof GatewayError) return writeDenial(req, res, exception, exception.headers);
    if (exception instanceof DomainError) return writeDenial(req, res, exception);
    if (exception instanceof HttpException) {
      const status = exception.getStatus();
      const code =
        status === 404
          ? 'not_found'
          : status === 401
            ? 'unauthorized'
            : status === 403
              ? 'forbidden'
              : status === 413
                ? 'payload_too_large'
                : status < 500
                  ? 'invalid_request'
                  : 'internal_error';
      const message = typeof exception.getResponse() === 'string' ? String(exception.getResponse()) : exception.message;
      res.status(status).json({ error: { message, type: status < 500 ? 'invalid_request_error' : 'api_error', code, param: null } });
      return;
    }
    this.log.error({ error: (exception as Error)?.name, message: (exception as Error)?.message }, 'unhandled error');
    res.status(500).json({ error: { message: 'internal error', type: 'api_error', code: 'internal_error', param: null } });
  }
}
