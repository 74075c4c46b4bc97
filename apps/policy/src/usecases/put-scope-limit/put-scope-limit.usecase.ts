import { Inject, Injectable } from '@nestjs/common';
import { ChangeRequestRepository, PolicyRepository, ScopeLimitInput, Tx } from '@gateway/db';
import { DomainError, ScopeKind, SCOPE_KINDS, scopeLimitSpendRaises } from '@gateway/domain';
import type { Operator } from '@gateway/service-kit';
import { Clock, CLOCK, IdGenerator, InjectIds } from '@gateway/service-kit';
import type { ChangeRequestStore, ScopeLimitStore } from '../../ports';
import { PolicyError } from '../../policy.errors';
import { requestChange } from '../change-requests';
import { parseValue, resourceId } from '../input';
import { scopeLimitJson } from '../views';
import { PutScopeLimitCommand } from './put-scope-limit.command';

/**
 * Sets the token and spend limits of a team or an environment. A change that raises what may be
 * spent (a higher or removed limit, a shorter budget period, a token rate moved to per-instance
 * counters) becomes a change request for a second operator; a first limit or a lower one applies
 * at once. Change requests name their target `<scope>/<id>`.
 */
@Injectable()
export class PutScopeLimit {
  constructor(
    @Inject(PolicyRepository) private readonly limits: ScopeLimitStore,
    @Inject(ChangeRequestRepository) private readonly changes: ChangeRequestStore,
    @Inject(CLOCK) private readonly clock: Clock,
    @InjectIds() private readonly ids: IdGenerator,
  ) {}

  async execute(op: Operator, scope: string, scopeId: string, cmd: PutScopeLimitCommand) {
    const kind = scopeKind(scope);
    parseValue(resourceId, scopeId, 'id');
    const now = this.clock.now();
    const input = toInput(kind, scopeId, cmd, op.subject, cmd.reason ?? 'scope limit set');
    const raises = scopeLimitSpendRaises(await this.limits.scopeLimit(kind, scopeId), input);
    if (raises.length > 0) {
      return requestChange(
        this.changes,
        this.ids,
        op,
        { kind: 'scope_limit', targetId: `${kind}/${scopeId}`, command: cmd, raises, reason: input.reason },
        now,
      );
    }
    await this.limits.putScopeLimit(input, now);
    const stored = await this.limits.scopeLimit(kind, scopeId);
    if (!stored) throw new Error(`scope limit ${kind}/${scopeId} vanished after it was written`);
    return scopeLimitJson(stored);
  }

  /** The approved change, written inside the approving transaction. */
  async applyApproved(actor: string, reason: string, targetId: string, cmd: PutScopeLimitCommand, now: Date, tx: Tx): Promise<void> {
    const slash = targetId.indexOf('/');
    const kind = scopeKind(targetId.slice(0, slash));
    await this.limits.putScopeLimit(toInput(kind, targetId.slice(slash + 1), cmd, actor, reason), now, tx);
  }

  async get(scope: string, scopeId: string) {
    const stored = await this.limits.scopeLimit(scopeKind(scope), scopeId);
    if (!stored) throw new PolicyError('not_found', `no limits set for ${scope} ${scopeId}`);
    return scopeLimitJson(stored);
  }

  async list() {
    return { scope_limits: (await this.limits.listScopeLimits()).map(scopeLimitJson) };
  }
}

function scopeKind(scope: string): ScopeKind {
  const kind = SCOPE_KINDS.find((k) => k === scope);
  if (!kind) throw new DomainError('invalid_request', `scope must be one of ${SCOPE_KINDS.join(', ')}`, 'scope');
  return kind;
}

function toInput(scope: ScopeKind, scopeId: string, cmd: PutScopeLimitCommand, actor: string, reason: string): ScopeLimitInput {
  return {
    scope,
    scopeId,
    tokensPerMinute: cmd.tokens_per_minute,
    tokenRateEnforcement: cmd.token_rate_enforcement,
    budgetMicrousd: cmd.budget_microusd,
    budgetPeriod: cmd.budget_period,
    actor,
    reason,
  };
}
