import { createHash } from 'node:crypto';
import { ForbiddenException, Injectable, UnauthorizedException } from '@nestjs/common';
import type { Request } from 'express';
import { PolicyRepository } from '@gateway/db';

export type OperatorRole = 'operator' | 'approver' | 'finance';

export interface Operator {
  subject: string;
  roles: string[];
}

/** Operator bearer tokens (only their hash is stored) with role checks. */
@Injectable()
export class OperatorAuth {
  constructor(private readonly policy: PolicyRepository) {}

  async require(req: Request, anyOf: OperatorRole[]): Promise<Operator> {
    const header = req.headers.authorization ?? '';
    const m = /^Bearer\s+(.+)$/i.exec(header);
    if (!m) throw new UnauthorizedException('operator bearer token required');
    const op = await this.policy.operatorByTokenHash(createHash('sha256').update(m[1].trim()).digest('hex'));
    if (!op) throw new UnauthorizedException('unknown or revoked operator token');
    if (!anyOf.some((r) => op.roles.includes(r))) throw new ForbiddenException(`requires one of the roles: ${anyOf.join(', ')}`);
    return op;
  }
}
