import { createHash } from 'node:crypto';
import type { Request } from 'express';
import type { WorkloadPolicy } from '@gateway/db';
import { Metrics } from './metrics';
import { OperatorAuth } from './operator-auth';

const sha = (s: string) => createHash('sha256').update(s).digest('hex');
const req = (authorization?: string) => ({ headers: authorization ? { authorization } : {} }) as Request;

describe('OperatorAuth', () => {
  const tokens = {
    async operatorByTokenHash(hash: string) {
      return hash === sha('op-token') ? { subject: 'olga', roles: ['operator'] } : null;
    },
  };
  const keys = {
    async workloadByKeyHash(hash: string) {
      return hash === sha('gw_app_key') ? ({ id: 'wl' } as WorkloadPolicy) : null;
    },
  };
  const metrics = new Metrics('test');
  const auth = new OperatorAuth(tokens, keys, metrics);

  it('passes operators with a required role', async () => {
    await expect(auth.require(req('Bearer op-token'), ['operator'])).resolves.toEqual({ subject: 'olga', roles: ['operator'] });
  });

  it('answers a valid workload key with 403 forbidden, not 401', async () => {
    await expect(auth.require(req('Bearer gw_app_key'), ['operator'])).rejects.toMatchObject({ code: 'forbidden' });
  });

  it('keeps 401 for unknown or missing tokens and 403 for a missing role', async () => {
    await expect(auth.require(req('Bearer gw_unknown'), ['operator'])).rejects.toMatchObject({ code: 'unauthorized' });
    await expect(auth.require(req(), ['operator'])).rejects.toMatchObject({ code: 'unauthorized' });
    await expect(auth.require(req('Bearer op-token'), ['approver'])).rejects.toMatchObject({ code: 'forbidden' });
  });

  it('counts unauthenticated refusals by reason (no row is written for them)', async () => {
    const m = new Metrics('test');
    const counted = new OperatorAuth(tokens, keys, m);
    await counted.require(req('Bearer gw_unknown'), ['operator']).catch(() => undefined);
    await counted.require(req(), ['operator']).catch(() => undefined);
    await counted.require(req('Bearer gw_app_key'), ['operator']).catch(() => undefined);
    const values = (await m.unauthenticated.get()).values.map((v) => [v.labels.reason, v.value]);
    expect(values.sort()).toEqual([
      ['missing_credential', 1],
      ['unknown_credential', 1],
    ]);
  });
});
