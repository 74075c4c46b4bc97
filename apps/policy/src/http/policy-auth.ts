import { createHash } from 'node:crypto';
import { ForbiddenException, Inject, Injectable, UnauthorizedException } from '@nestjs/common';
import type { Request } from 'express';
import { CatalogRepository } from '@gateway/db';
import { Operator, OperatorAuth, OperatorRole } from '@gateway/service-kit';
import type { WorkloadKeyLookup } from '../ports';

/**
 * Operator authentication for the policy API. A valid workload key is a real credential, just
 * not one for this API: it gets 403 `forbidden` (not 401), so an app team that pointed the wrong
 * key here learns that the key works but lacks the right, instead of suspecting a bad key.
 */
@Injectable()
export class PolicyAuth {
  constructor(
    @Inject(OperatorAuth) private readonly operators: Pick<OperatorAuth, 'require'>,
    @Inject(CatalogRepository) private readonly keys: WorkloadKeyLookup,
  ) {}

  async require(req: Request, anyOf: OperatorRole[]): Promise<Operator> {
    try {
      return await this.operators.require(req, anyOf);
    } catch (err) {
      if (err instanceof UnauthorizedException) {
        const token = /^Bearer\s+(.+)$/i.exec(req.headers.authorization ?? '')?.[1]?.trim();
        if (token && (await this.keys.workloadByKeyHash(createHash('sha256').update(token, 'utf8').digest('hex')))) {
          throw new ForbiddenException('workload API keys cannot call the policy API; use an operator token');
        }
      }
      throw err;
    }
  }
}
