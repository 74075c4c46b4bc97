import { ArgumentsHost, Catch, ExceptionFilter } from '@nestjs/common';
import type { Response } from 'express';
import { ReconciliationError, reconciliationErrorStatus } from '../reconciliation.errors';

/** Case-state conflicts in the same error shape as every other denial, with their own stable codes. */
@Catch(ReconciliationError)
export class ReconciliationErrorFilter implements ExceptionFilter {
  catch(err: ReconciliationError, host: ArgumentsHost): void {
    const res = host.switchToHttp().getResponse<Response>();
    res
      .status(reconciliationErrorStatus(err.code))
      .json({ error: { message: err.message, type: 'invalid_request_error', code: err.code, param: null } });
  }
}
