import { applyDecorators, CanActivate, createParamDecorator, ExecutionContext, Injectable, SetMetadata, UseGuards } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { ApiBearerAuth, ApiResponse } from '@nestjs/swagger';
import type { Request } from 'express';
import { Operator, OperatorAuth, OperatorRole } from './operator-auth';

const ROLES = 'gateway:operator-roles';

type OperatorRequest = Request & { operator?: Operator };

/** The roles that may call a handler (any one of them suffices); read by `OperatorGuard`. */
export const Roles = (...roles: [OperatorRole, ...OperatorRole[]]) => SetMetadata(ROLES, roles);

/**
 * Authenticates the operator bearer token of every request to a guarded controller and checks the
 * handler's `@Roles(...)`: 401 `unauthorized` without a known token, 403 `forbidden` for a
 * workload key or a missing role. A handler without `@Roles` fails closed (403): no role may call it.
 * The authenticated operator is handed to the handler by `@CurrentOperator()`.
 */
@Injectable()
export class OperatorGuard implements CanActivate {
  constructor(
    private readonly auth: OperatorAuth,
    private readonly reflector: Reflector,
  ) {}

  async canActivate(ctx: ExecutionContext): Promise<boolean> {
    const roles = this.reflector.getAllAndOverride<OperatorRole[] | undefined>(ROLES, [ctx.getHandler(), ctx.getClass()]) ?? [];
    const req = ctx.switchToHttp().getRequest<OperatorRequest>();
    req.operator = await this.auth.require(req, roles);
    return true;
  }
}

/** The operator `OperatorGuard` authenticated for this request. */
export const CurrentOperator = createParamDecorator((_: unknown, ctx: ExecutionContext): Operator => {
  const op = ctx.switchToHttp().getRequest<OperatorRequest>().operator;
  if (!op) throw new Error('@CurrentOperator() used on a handler without OperatorGuard');
  return op;
});

/**
 * Class decorator for an operator API controller: the guard, the bearer scheme and the two
 * authentication answers in its OpenAPI document.
 */
export const OperatorApi = () =>
  applyDecorators(
    UseGuards(OperatorGuard),
    ApiBearerAuth(),
    ApiResponse({ status: 401, description: 'unauthorized: missing or unknown operator token' }),
    ApiResponse({ status: 403, description: 'forbidden: wrong role, or a workload key' }),
  );
