import { z } from 'zod';
import { text } from '../input';

export const revokeExceptionBody = z.object({ reason: text(1000) }).strict();
export type RevokeExceptionCommand = z.output<typeof revokeExceptionBody>;
