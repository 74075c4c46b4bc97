import { hashCredential } from '@gateway/domain';
import type { OperatorTokenView } from '@gateway/db';
import { parseExpiry, parseTokenCommand, runTokenCommand } from './operator-token';

describe('operator-token CLI', () => {
  it('parses issue, list and revoke', () => {
    expect(parseTokenCommand(['issue', '--subject', 'x', '--roles', 'operator,finance', '--expires', '30d'])).toEqual({
      kind: 'issue',
      subject: 'x',
      roles: ['operator', 'finance'],
      expiresInMs: 30 * 86_400_000,
    });
    expect(parseTokenCommand(['list'])).toEqual({ kind: 'list' });
    expect(parseTokenCommand(['revoke', 'abc'])).toEqual({ kind: 'revoke', id: 'abc' });
  });

  it.each([
    [['issue', '--subject', 'x', '--roles', 'operator']],
    [['issue', '--subject', 'x', '--roles', 'root', '--expires', '1d']],
    [['issue', '--roles', 'operator', '--expires', '1d']],
    [['issue', '--subject', 'x', '--roles', 'operator', '--expires', 'forever']],
    [['revoke']],
    [['drop']],
  ])('refuses %j', (argv) => {
    expect(() => parseTokenCommand(argv)).toThrow();
  });

  it('bounds the expiry', () => {
    expect(parseExpiry('12h')).toBe(43_200_000);
    expect(() => parseExpiry('400d')).toThrow();
    expect(() => parseExpiry('0s')).toThrow();
  });

  it('issues a token shown once (only its hash stored), lists status, revokes once', async () => {
    const rows: Array<OperatorTokenView & { tokenHash: string }> = [];
    const store = {
      addOperatorToken: async (
        t: { id: string; subject: string; roles: string[]; tokenHash: string; expiresAt?: Date | null },
        now: Date,
      ) => {
        rows.push({ ...t, expiresAt: t.expiresAt ?? null, createdAt: now, revokedAt: null });
      },
      listOperatorTokens: async () => rows,
      revokeOperatorToken: async (id: string, now: Date) => {
        const r = rows.find((x) => x.id === id && !x.revokedAt);
        if (r) r.revokedAt = now;
        return r !== undefined;
      },
    };
    const now = new Date('2026-12-01T00:00:00Z');
    const issued = (await runTokenCommand({ kind: 'issue', subject: 'x', roles: ['operator'], expiresInMs: 86_400_000 }, store, now)) as {
      id: string;
      token: string;
      expires_at: string;
    };
    expect(issued.expires_at).toBe('2026-12-02T00:00:00.000Z');
    expect(rows[0].tokenHash).toBe(hashCredential(issued.token));
    expect(JSON.stringify(rows)).not.toContain(issued.token);
    const later = new Date('2026-12-03T00:00:00Z');
    expect(await runTokenCommand({ kind: 'list' }, store, later)).toEqual([expect.objectContaining({ id: issued.id, status: 'expired' })]);
    await runTokenCommand({ kind: 'revoke', id: issued.id }, store, now);
    await expect(runTokenCommand({ kind: 'revoke', id: issued.id }, store, now)).rejects.toThrow();
  });
});
