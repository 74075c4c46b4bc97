import { createHash } from 'node:crypto';

/**
 * The one way a workload key or an operator token is turned into what Postgres stores and looks
 * up: SHA-256, hex. Keys are long random strings, so an unsalted fast hash is enough to make a
 * leaked table useless for calling the gateway.
 */
export function hashCredential(secret: string): string {
  return createHash('sha256').update(secret, 'utf8').digest('hex');
}

/**
 * A route contract names its upstream credential (`credential_ref`); dispatch reads the value from
 * `GATEWAY_CREDENTIAL_<NAME>` or its secrets file. The name is part of an environment variable's
 * name, so it is upper-case letters, digits and `_` only.
 */
export const CREDENTIAL_REF_PATTERN = /^[A-Z0-9_]{1,64}$/;

export function isCredentialRef(name: string): boolean {
  return CREDENTIAL_REF_PATTERN.test(name);
}
