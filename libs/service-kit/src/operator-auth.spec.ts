import { createHash } from 'node:crypto';
import type { Request } from 'express';
import type { WorkloadPolicy } from '@gateway/db';
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
  const auth = new OperatorAuth(tokens, keys);

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
});
