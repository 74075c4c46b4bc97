import { DomainError, PolicyErrorCode } from '@gateway/domain';

export type { PolicyErrorCode } from '@gateway/domain';

/**
 * A refusal of the policy API: a `DomainError` narrowed to the policy codes (status and
 * x-should-retry come from the one registry in @gateway/domain).
 */
export class PolicyError extends DomainError<PolicyErrorCode> {
  constructor(code: PolicyErrorCode, message: string, param: string | null = null) {
    super(code, message, param ?? undefined);
    this.name = 'PolicyError';
  }
}
