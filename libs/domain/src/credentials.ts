import { createHash } from 'node:crypto';

/**
 * The one way a workload key or an operator token is turned into what Postgres stores and looks
 * up: SHA-256, hex. Keys are long random strings, so an unsalted fast hash is enough to make a
 * leaked table useless for calling the gateway.
 */
export function hashCredential(secret: string): string {
  return createHash('sha256').update(secret, 'utf8').digest('hex');
}
