import { randomBytes, randomUUID } from 'node:crypto';
import { hashCredential } from '@gateway/domain';
import type { PolicyRepository } from '@gateway/db';

/**
 * Operator tokens from the command line (`npm run operator-token -- issue|list|revoke`). Only the
 * token's hash is stored; `issue` prints the token once. Every token gets an expiry.
 */
export const OPERATOR_ROLES = ['operator', 'approver', 'finance'] as const;
const MAX_EXPIRY_MS = 366 * 86_400_000;

export type TokenCommand =
  { kind: 'issue'; subject: string; roles: string[]; expiresInMs: number } | { kind: 'list' } | { kind: 'revoke'; id: string };

export const USAGE = `usage:
  npm run operator-token -- issue --subject <name> --roles operator,approver,finance --expires <30d|12h|90m>
  npm run operator-token -- list
  npm run operator-token -- revoke <id>`;

/** `30d`, `12h`, `90m`, `45s` → milliseconds; at most a year. */
export function parseExpiry(raw: string): number {
  const m = /^(\d{1,6})([smhd])$/.exec(raw);
  if (!m) throw new Error(`--expires must look like 30d, 12h, 90m or 45s, got '${raw}'`);
  const ms = Number(m[1]) * { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }[m[2] as 's' | 'm' | 'h' | 'd'];
  if (ms < 1000 || ms > MAX_EXPIRY_MS) throw new Error('--expires must be between 1s and 366d');
  return ms;
}

export function parseTokenCommand(argv: string[]): TokenCommand {
  const [verb, ...rest] = argv;
  const flag = (name: string) => {
    const i = rest.indexOf(`--${name}`);
    const v = i >= 0 ? rest[i + 1] : undefined;
    if (v === undefined || v.startsWith('--')) throw new Error(`--${name} is required\n${USAGE}`);
    return v;
  };
  switch (verb) {
    case 'issue': {
      const roles = flag('roles')
        .split(',')
        .map((r) => r.trim())
        .filter(Boolean);
      const unknown = roles.filter((r) => !(OPERATOR_ROLES as readonly string[]).includes(r));
      if (roles.length === 0 || unknown.length > 0) throw new Error(`--roles takes ${OPERATOR_ROLES.join(', ')}; got '${roles.join(',')}'`);
      const subject = flag('subject');
      if (!/^[A-Za-z0-9._@-]{1,128}$/.test(subject)) throw new Error('--subject must be 1-128 characters of letters, digits, . _ @ -');
      return { kind: 'issue', subject, roles, expiresInMs: parseExpiry(flag('expires')) };
    }
    case 'list':
      return { kind: 'list' };
    case 'revoke':
      if (!rest[0]) throw new Error(`revoke needs a token id\n${USAGE}`);
      return { kind: 'revoke', id: rest[0] };
    default:
      throw new Error(USAGE);
  }
}

type TokenStore = Pick<PolicyRepository, 'addOperatorToken' | 'listOperatorTokens' | 'revokeOperatorToken'>;

/** Runs one command; returns what to print (the token itself only for `issue`). */
export async function runTokenCommand(cmd: TokenCommand, store: TokenStore, now: Date): Promise<unknown> {
  switch (cmd.kind) {
    case 'issue': {
      const token = `op_${randomBytes(24).toString('base64url')}`;
      const id = randomUUID();
      const expiresAt = new Date(now.getTime() + cmd.expiresInMs);
      await store.addOperatorToken({ id, subject: cmd.subject, roles: cmd.roles, tokenHash: hashCredential(token), expiresAt }, now);
      return { id, subject: cmd.subject, roles: cmd.roles, expires_at: expiresAt.toISOString(), token };
    }
    case 'list':
      return (await store.listOperatorTokens()).map((t) => ({
        id: t.id,
        subject: t.subject,
        roles: t.roles,
        created_at: t.createdAt.toISOString(),
        expires_at: t.expiresAt?.toISOString() ?? null,
        status: t.revokedAt ? 'revoked' : t.expiresAt && t.expiresAt <= now ? 'expired' : 'active',
      }));
    case 'revoke':
      if (!(await store.revokeOperatorToken(cmd.id, now))) throw new Error(`no active operator token ${cmd.id}`);
      return { id: cmd.id, status: 'revoked' };
    default: {
      const unreachable: never = cmd;
      throw new Error(`Unhandled command ${String(unreachable)}`);
    }
  }
}
