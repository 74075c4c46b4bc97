import { z } from 'zod';
import { text } from '../input';

export const revokeApiKeyBody = z.object({ reason: text(500) }).strict();
export type RevokeApiKeyCommand = z.output<typeof revokeApiKeyBody>;
