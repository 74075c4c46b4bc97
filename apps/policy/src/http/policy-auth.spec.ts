import { createHash } from 'node:crypto';
import { ForbiddenException, UnauthorizedException } from '@nestjs/common';
import type { Request } from 'express';
import type { WorkloadPolicy } from '@gateway/db';
import type { OperatorRole } from '@gateway/service-kit';
import { PolicyAuth } from './policy-auth';

const sha = (s: string) => createHash('sha256').update(s).digest('hex');
const req = (authorization?: string) => ({ headers: authorization ? { authorization } : {} }) as Request;

describe('PolicyAuth', () => {
  const operators = {
    async require(r: Request, anyOf: OperatorRole[]) {
      if (r.headers.authorization !== 'Bearer op-token') throw new UnauthorizedException('unknown or revoked operator token');
      if (!anyOf.includes('operator')) throw new ForbiddenException('role');
      return { subject: 'olga', roles: ['operator'] };
    },
  };
  const keys = {
    async workloadByKeyHash(hash: string) {
      return hash === sha('gw_app_key') ? ({ id: 'wl' } as WorkloadPolicy) : null;
    },
  };
  const auth = new PolicyAuth(operators, keys);

  it('passes operators through', async () => {
    await expect(auth.require(req('Bearer op-token'), ['operator'])).resolves.toEqual({ subject: 'olga', roles: ['operator'] });
  });

  it('answers a valid workload key with 403, not 401', async () => {
    await expect(auth.require(req('Bearer gw_app_key'), ['operator'])).rejects.toBeInstanceOf(ForbiddenException);
  });

  it('keeps 401 for unknown or missing tokens and 403 for a missing role', async () => {
    await expect(auth.require(req('Bearer gw_unknown'), ['operator'])).rejects.toBeInstanceOf(UnauthorizedException);
    await expect(auth.require(req(), ['operator'])).rejects.toBeInstanceOf(UnauthorizedException);
    await expect(auth.require(req('Bearer op-token'), ['approver'])).rejects.toBeInstanceOf(ForbiddenException);
  });
});
