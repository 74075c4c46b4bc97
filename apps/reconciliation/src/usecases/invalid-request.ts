import type { z } from 'zod';
import { DomainError } from '@gateway/domain';

/** The first schema issue as the stable `invalid_request` denial, naming the field. */
export function invalidRequest(error: z.ZodError): DomainError {
  const issue = error.issues[0];
  const param = issue?.path.map(String).join('.') || undefined;
  return new DomainError('invalid_request', issue ? `${param ? `${param}: ` : ''}${issue.message}` : 'invalid request body', param);
}
