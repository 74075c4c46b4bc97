import { assertNever } from '@gateway/domain';

/** Why a case operation was refused; stable codes for the operator API. */
export type ReconciliationErrorCode =
  'case_not_found' | 'case_already_resolved' | 'attempt_already_settled' | 'case_not_resolvable' | 'provider_request_mismatch';

export class ReconciliationError extends Error {
  constructor(
    readonly code: ReconciliationErrorCode,
    message: string,
  ) {
    super(message);
    this.name = 'ReconciliationError';
  }
}

export function reconciliationErrorStatus(code: ReconciliationErrorCode): number {
  switch (code) {
    case 'case_not_found':
      return 404;
    case 'case_already_resolved':
    case 'attempt_already_settled':
    case 'case_not_resolvable':
    case 'provider_request_mismatch':
      return 409;
    default:
      return assertNever(code, 'reconciliation error code');
  }
}
