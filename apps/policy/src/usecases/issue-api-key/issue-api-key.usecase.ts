import { Inject, Injectable } from '@nestjs/common';
import { PolicyRepository } from '@gateway/db';
import { hashCredential } from '@gateway/domain';
import type { Operator } from '@gateway/service-kit';
import { Clock, CLOCK, ENTROPY, Entropy, IdGenerator, InjectIds } from '@gateway/service-kit';
import { PolicyError } from '../../policy.errors';
import type { WorkloadStore } from '../../ports';
import { apiKeyJson } from '../views';

export const KEY_PREFIX_LENGTH = 11;

/**
 * Issues a workload key: `gw_` + 32 random bytes in base64url. Only its SHA-256 (hex) and a short
 * prefix are stored; the key itself is in this response and nowhere else.
 */
@Injectable()
export class IssueApiKey {
  constructor(
    @Inject(PolicyRepository) private readonly workloads: WorkloadStore,
    @Inject(CLOCK) private readonly clock: Clock,
    @InjectIds() private readonly ids: IdGenerator,
    @Inject(ENTROPY) private readonly entropy: Entropy,
  ) {}

  async execute(op: Operator, workloadId: string) {
    const workload = await this.workloads.workloadById(workloadId);
    if (!workload) throw new PolicyError('not_found', `workload ${workloadId} not found`);
    const key = `gw_${this.entropy.bytes(32).toString('base64url')}`;
    const id = this.ids.next();
    await this.workloads.addApiKey(
      {
        id,
        workloadId,
        keyHash: hashCredential(key),
        keyPrefix: key.slice(0, KEY_PREFIX_LENGTH),
        actor: op.subject,
      },
      this.clock.now(),
    );
    const stored = await this.workloads.apiKeyById(id);
    if (!stored) throw new Error(`key ${id} was not stored`);
    return { ...apiKeyJson(stored), key, note: 'store this key now: it is shown once and only its hash is kept' };
  }
}
