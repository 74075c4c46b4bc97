// eslint-disable-next-line no-restricted-imports -- the one filter is where Nest's own exceptions (unknown path, …) are mapped
import { ArgumentsHost, Catch, ExceptionFilter, HttpException } from '@nestjs/common';
import type { Request, Response } from 'express';
import { isDatabaseOutOfService, isDatabaseRefusingWrites, isDatabaseUnavailable } from '@gateway/db';
import { denialHttpStatus, denialShouldRetry, DomainError, ErrorCode } from '@gateway/domain';
import { defaultClassifier, ErrorKind } from '@gateway/messaging';

/**
 * How every service's consumers tell handler errors apart (`KafkaBus`'s poison policy): a database
 * server out of service (unreachable, or refusing every write) is `unavailable` (retried in place
 * for minutes: a Postgres restart, failover or full disk must not park every message in flight for
 * an operator to re-publish), the rest as `defaultClassifier` says.
 */
export function classifyConsumerError(err: unknown): ErrorKind {
  return isDatabaseOutOfService(err) ? 'unavailable' : defaultClassifier(err);
}

const GEMINI_STATUS: Record<number, string> = {
  400: 'INVALID_ARGUMENT',
  401: 'UNAUTHENTICATED',
  403: 'PERMISSION_DENIED',
  404: 'NOT_FOUND',
  409: 'ALREADY_EXISTS',
  413: 'INVALID_ARGUMENT',
  429: 'RESOURCE_EXHAUSTED',
  500: 'INTERNAL',
  502: 'UNAVAILABLE',
  503: 'UNAVAILABLE',
  504: 'DEADLINE_EXCEEDED',
};

/**
 * Gemini's endpoints: everything under /v1beta/, `/v1/models/{model}:{method}` (@google/genai with
 * `apiVersion: 'v1'`), and the model list `/v1/models[/{id}]` when the caller authenticates the
 * way the Gemini SDK does (`x-goog-api-key`); that path is OpenAI's too.
 */
export function isGeminiRequest(req: GeminiProbe): boolean {
  const path = req.path;
  if (path.startsWith('/v1beta/') || /^\/v1\/models\/[^/]+:[A-Za-z]+$/.test(path)) return true;
  return /^\/v1\/models(\/[^/]+)?\/?$/.test(path) && sendsGoogApiKey(req);
}

/** What `isGeminiRequest` looks at: the path, and for the shared model-list path the key header. */
export type GeminiProbe = Pick<Request, 'path'> & { headers?: Request['headers'] };

/** The Gemini SDK sends its key in `x-goog-api-key`; the OpenAI SDK in `Authorization: Bearer`. */
export function sendsGoogApiKey(req: { headers?: Request['headers'] }): boolean {
  const h = req.headers?.['x-goog-api-key'];
  return typeof h === 'string' && h.length > 0;
}

/**
 * A denial's body in the caller's dialect: OpenAI's `{error:{message,type,code,param}}`, or for
 * the Gemini endpoints Gemini's `{error:{code,message,status,details}}` with our stable code in
 * `status` and in the details. Streams send the same body as their closing error event.
 */
export function denialBody(req: GeminiProbe, err: DomainError): { error: Record<string, unknown> } {
  const status = denialHttpStatus(err.code);
  if (isGeminiRequest(req)) {
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

/**
 * Writes a refusal in the caller's dialect (see denialBody). Status and x-should-retry come from
 * the one registry in @gateway/domain; the error's own headers (Retry-After, x-gateway-action-id)
 * and `extraHeaders` are set too.
 */
export function writeDenial(req: GeminiProbe, res: DenialTarget, err: DomainError, extraHeaders: Record<string, string> = {}): void {
  const retry = denialShouldRetry(err.code);
  if (retry !== null) res.setHeader('x-should-retry', String(retry));
  for (const [k, v] of Object.entries({ ...err.headers, ...extraHeaders })) res.setHeader(k, v);
  res.status(denialHttpStatus(err.code)).json(denialBody(req, err));
}

/** What express's body parser (body-parser / raw-body) attaches to the errors it passes to `next`. */
interface BodyParserError {
  type: string;
  status?: number;
  statusCode?: number;
  limit?: number;
}

function isBodyParserError(e: unknown): e is BodyParserError {
  return (
    typeof e === 'object' &&
    e !== null &&
    typeof (e as BodyParserError).type === 'string' &&
    (typeof (e as BodyParserError).status === 'number' || typeof (e as BodyParserError).statusCode === 'number')
  );
}

/** The code a framework-raised HTTP status stands for (Nest's own 404 for an unknown path, …). */
function codeForStatus(status: number): ErrorCode {
  if (status === 401) return 'unauthorized';
  if (status === 403) return 'forbidden';
  if (status === 404) return 'not_found';
  if (status === 413) return 'payload_too_large';
  if (status >= 400 && status < 500) return 'invalid_request';
  return 'internal_error';
}

/**
 * Everything thrown while serving a request, as a `DomainError` of the one registry:
 * - a `DomainError` (or a subclass: `PolicyError`, `ReconciliationError`) as it is;
 * - express body-parser failures: a body over the limit is `payload_too_large` (413), anything
 *   else it refuses (malformed JSON, bad charset or encoding, aborted upload) `invalid_request`;
 * - Nest's own `HttpException`s (unknown path, wrong method): the code their status stands for;
 * - the database out of reach (pool exhausted, connection refused or terminated) or refusing
 *   writes (read-only, disk full): `service_unavailable` (503, Retry-After), at once, never a 500;
 * - anything else: `null`, an internal error the caller must not see the details of.
 */
export function toDomainError(exception: unknown): DomainError | null {
  if (exception instanceof DomainError) return exception;
  if (isDatabaseUnavailable(exception)) {
    const why = isDatabaseRefusingWrites(exception) ? "the gateway's database takes no writes" : 'the gateway cannot reach its database';
    return new DomainError('service_unavailable', `${why} right now; retry shortly`, undefined, { 'retry-after': '1' });
  }
  if (isBodyParserError(exception)) {
    if (exception.type === 'entity.too.large') {
      const limit = exception.limit ? ` of ${exception.limit} bytes` : '';
      return new DomainError('payload_too_large', `request body exceeds the limit${limit}`);
    }
    if (exception.type === 'entity.parse.failed') return new DomainError('invalid_request', 'request body is not valid JSON');
    const status = exception.status ?? exception.statusCode ?? 400;
    return status < 500 ? new DomainError('invalid_request', `request body refused (${exception.type})`) : null;
  }
  if (exception instanceof HttpException) {
    const response = exception.getResponse();
    return new DomainError(codeForStatus(exception.getStatus()), typeof response === 'string' ? response : exception.message);
  }
  return null;
}

/**
 * The one exception filter of every service: maps whatever was thrown to the stable error shape
 * through `toDomainError`; anything unexpected is logged (name and message, never a body) and
 * answered as a 500 `internal_error` without internals. Also the express error middleware for
 * what fails before Nest routes a request (the body parser): see `handle`.
 */
@Catch()
export class GatewayExceptionFilter implements ExceptionFilter {
  constructor(private readonly log: { error(obj: object, msg?: string): void }) {}

  catch(exception: unknown, host: ArgumentsHost): void {
    const ctx = host.switchToHttp();
    this.handle(exception, ctx.getRequest<Request>(), ctx.getResponse<Response>());
  }

  handle(exception: unknown, req: Request, res: Response): void {
    if (res.headersSent) {
      res.end();
      return;
    }
    const err = toDomainError(exception);
    if (err) return writeDenial(req, res, err);
    this.log.error({ error: (exception as Error)?.name, message: (exception as Error)?.message }, 'unhandled error');
    writeDenial(req, res, new DomainError('internal_error', 'internal error'));
  }

  /** Express error middleware (4 arguments) sending body-parser failures through this filter. */
  readonly expressErrorHandler = (err: unknown, req: Request, res: Response, next: (err?: unknown) => void): void => {
    if (!err) return next();
    this.handle(err, req, res);
  };
}
