import { DomainError, ReconciliationErrorCode } from '@gateway/domain';

export type { ReconciliationErrorCode } from '@gateway/domain';

/**
 * Why a case operation was refused: a `DomainError` narrowed to the reconciliation codes (status
 * and x-should-retry come from the one registry in @gateway/domain).
 */
export class ReconciliationError extends DomainError<ReconciliationErrorCode> {
  constructor(code: ReconciliationErrorCode, message: string) {
    super(code, message);
    this.name = 'ReconciliationError';
  }
}
