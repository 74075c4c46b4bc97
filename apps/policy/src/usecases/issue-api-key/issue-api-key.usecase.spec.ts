import { createHash } from 'node:crypto';
import { countingEntropy, FakeClock, InMemoryPolicyStore, SequentialIds } from '../../testing/in-memory-policy.store';
import { olga, T0, workloadCommand } from '../../testing/fixtures';
import { fourEyes } from '../../testing/four-eyes';
import { RevokeApiKey } from '../revoke-api-key/revoke-api-key.usecase';
import { IssueApiKey } from './issue-api-key.usecase';

describe('IssueApiKey and RevokeApiKey', () => {
  const setup = async () => {
    const store = new InMemoryPolicyStore();
    const clock = new FakeClock(T0);
    await fourEyes(store, clock).seedWorkload('wl', workloadCommand());
    return {
      store,
      clock,
      issue: new IssueApiKey(store, clock, new SequentialIds('key'), countingEntropy),
      revoke: new RevokeApiKey(store, clock),
    };
  };

  it('returns gw_ + 32 random bytes in base64url once, storing only its SHA-256 and a prefix', async () => {
    const { issue, store } = await setup();
    const issued = await issue.execute(olga, 'wl');
    const expected = `gw_${Buffer.from(Array.from({ length: 32 }, (_, i) => i)).toString('base64url')}`;
    expect(issued).toMatchObject({
      key: expected,
      key_prefix: expected.slice(0, 11),
      status: 'active',
      workload_id: 'wl',
      created_by: 'olga',
    });
    expect(issued.key).toMatch(/^gw_[A-Za-z0-9_-]{43}$/);
    const stored = store.keys.get(issued.id)!;
    expect(stored.keyHash).toBe(createHash('sha256').update(expected).digest('hex'));
    expect(JSON.stringify([...store.keys.values()])).not.toContain(expected);
    expect(await store.workloadByKeyHash(stored.keyHash)).toEqual({ id: 'wl' });
  });

  it('is 404 for an unknown workload', async () => {
    const { issue } = await setup();
    await expect(issue.execute(olga, 'nope')).rejects.toMatchObject({ code: 'not_found' });
  });

  it('revokes once, with who and why; the key stops resolving', async () => {
    const { issue, revoke, store } = await setup();
    const issued = await issue.execute(olga, 'wl');
    const revoked = await revoke.execute(olga, 'wl', issued.id, { reason: 'leaked in a log' });
    expect(revoked).toMatchObject({
      status: 'revoked',
      revoked_by: 'olga',
      revoked_reason: 'leaked in a log',
      revoked_at: T0.toISOString(),
    });
    expect(await store.workloadByKeyHash(store.keys.get(issued.id)!.keyHash)).toBeNull();
    await expect(revoke.execute(olga, 'wl', issued.id, { reason: 'again' })).rejects.toMatchObject({ code: 'key_already_revoked' });
    await expect(revoke.execute(olga, 'other', issued.id, { reason: 'x' })).rejects.toMatchObject({ code: 'not_found' });
  });
});
