import { ExecutionContext } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import type { Request } from 'express';
import { Operator, OperatorAuth, OperatorRole } from './operator-auth';
import { OperatorGuard, Roles } from './operator-guard';

class Handlers {
  @Roles('operator', 'finance')
  ledger() {}
  unannotated() {}
}

describe('OperatorGuard', () => {
  const asked: OperatorRole[][] = [];
  const auth = {
    async require(_req: Request, anyOf: OperatorRole[]): Promise<Operator> {
      asked.push(anyOf);
      return { subject: 'olga', roles: ['finance'] };
    },
  };
  const guard = new OperatorGuard(auth as OperatorAuth, new Reflector());
  const ctx = (handler: () => void, req: Record<string, unknown>) =>
    ({
      getHandler: () => handler,
      getClass: () => Handlers,
      switchToHttp: () => ({ getRequest: () => req }),
    }) as unknown as ExecutionContext;

  it("authenticates with the handler's roles and hands the operator to the request", async () => {
    const req: Record<string, unknown> = {};
    await expect(guard.canActivate(ctx(Handlers.prototype.ledger, req))).resolves.toBe(true);
    expect(asked.at(-1)).toEqual(['operator', 'finance']);
    expect(req.operator).toEqual({ subject: 'olga', roles: ['finance'] });
  });

  it('asks for no role at all (so nobody passes) when a handler has no @Roles', async () => {
    await guard.canActivate(ctx(Handlers.prototype.unannotated, {}));
    expect(asked.at(-1)).toEqual([]);
  });
});
