import { Inject, Injectable, Optional } from '@nestjs/common';
import type { Request } from 'express';
import { CatalogRepository, PolicyRepository } from '@gateway/db';
import { DomainError, hashCredential } from '@gateway/domain';
import { Metrics } from './metrics';

export type OperatorRole = 'operator' | 'approver' | 'finance';

export interface Operator {
  subject: string;
  roles: string[];
}

/**
 * Operator bearer tokens (only their hash is stored) with role checks, for every operator API.
 * A valid workload key is a real credential, just not one for these APIs: it gets 403, not 401,
 * so an app team that used the wrong key learns the key works but lacks the right.
 */
@Injectable()
export class OperatorAuth {
  constructor(
    @Inject(PolicyRepository) private readonly tokens: Pick<PolicyRepository, 'operatorByTokenHash'>,
    @Inject(CatalogRepository) private readonly keys: Pick<CatalogRepository, 'workloadByKeyHash'>,
    @Optional() @Inject(Metrics) private readonly metrics?: Pick<Metrics, 'unauthenticated'>,
  ) {}

  async require(req: Request, anyOf: OperatorRole[]): Promise<Operator> {
    const token = /^Bearer\s+(.+)$/i.exec(req.headers.authorization ?? '')?.[1]?.trim();
    if (!token) {
      this.metrics?.unauthenticated.inc({ reason: 'missing_credential' });
      throw new DomainError('unauthorized', 'operator bearer token required');
    }
    const op = await this.tokens.operatorByTokenHash(hashCredential(token));
    if (!op) {
      if (await this.keys.workloadByKeyHash(hashCredential(token))) {
        throw new DomainError('forbidden', 'workload API keys cannot call operator APIs; use an operator token');
      }
      this.metrics?.unauthenticated.inc({ reason: 'unknown_credential' });
      throw new DomainError('unauthorized', 'unknown or revoked operator token');
    }
    if (!anyOf.some((r) => op.roles.includes(r))) throw new DomainError('forbidden', `requires one of the roles: ${anyOf.join(', ')}`);
    return op;
  }
}
