import { ArgumentsHost, Catch, ExceptionFilter, HttpException } from '@nestjs/common';
import type { Response } from 'express';

/** Refusals specific to the policy API, each with a stable snake_case code and its HTTP status. */
export type PolicyErrorCode =
  | 'not_found'
  | 'self_approval'
  | 'not_an_approver'
  | 'probe_failed'
  | 'route_exists'
  | 'alias_taken'
  | 'version_not_current'
  | 'invalid_transition'
  | 'exception_expired'
  | 'concurrent_change'
  | 'key_already_revoked'
  | 'price_revision_exists';

export function policyErrorStatus(code: PolicyErrorCode): number {
  switch (code) {
    case 'not_found':
      return 404;
    case 'self_approval':
    case 'not_an_approver':
      return 403;
    case 'probe_failed':
    case 'route_exists':
    case 'alias_taken':
    case 'version_not_current':
    case 'invalid_transition':
    case 'exception_expired':
    case 'concurrent_change':
    case 'key_already_revoked':
    case 'price_revision_exists':
      return 409;
    default: {
      const unreachable: never = code;
      throw new Error(`Unhandled policy error code: ${String(unreachable)}`);
    }
  }
}

/**
 * Extends HttpException so that, should the policy filter ever be missing, the shared filter
 * still answers with the right status (with a generic code) instead of a 500.
 */
export class PolicyError extends HttpException {
  constructor(
    readonly code: PolicyErrorCode,
    message: string,
    readonly param: string | null = null,
  ) {
    super(message, policyErrorStatus(code));
    this.name = 'PolicyError';
  }
}

/**
 * Writes policy refusals in the OpenAI error shape every gateway API uses. Controller-scoped
 * filters run before the global one, so the stable code survives.
 */
@Catch(PolicyError)
export class PolicyErrorFilter implements ExceptionFilter {
  catch(err: PolicyError, host: ArgumentsHost): void {
    const res = host.switchToHttp().getResponse<Response>();
    if (res.headersSent) {
      res.end();
      return;
    }
    // Only a lost race is worth repeating unchanged.
    res.setHeader('x-should-retry', String(err.code === 'concurrent_change'));
    res.status(err.getStatus()).json({ error: { message: err.message, type: 'invalid_request_error', code: err.code, param: err.param } });
  }
}
