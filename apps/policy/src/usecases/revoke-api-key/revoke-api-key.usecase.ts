import { Inject, Injectable } from '@nestjs/common';
import { PolicyRepository } from '@gateway/db';
import type { Operator } from '@gateway/service-kit';
import { Clock, CLOCK } from '@gateway/service-kit';
import { PolicyError } from '../../policy.errors';
import type { WorkloadStore } from '../../ports';
import { apiKeyJson } from '../views';
import { RevokeApiKeyCommand } from './revoke-api-key.command';

/**
 * Revokes a workload key, with who and why. Admission looks the key up on every request, so the
 * next request with it is refused (401).
 */
@Injectable()
export class RevokeApiKey {
  constructor(
    @Inject(PolicyRepository) private readonly workloads: WorkloadStore,
    @Inject(CLOCK) private readonly clock: Clock,
  ) {}

  async execute(op: Operator, workloadId: string, keyId: string, cmd: RevokeApiKeyCommand) {
    const result = await this.workloads.revokeApiKey({ workloadId, keyId, actor: op.subject, reason: cmd.reason }, this.clock.now());
    if (!result.ok) {
      throw result.reason === 'not_found'
        ? new PolicyError('not_found', `workload ${workloadId} has no key ${keyId}`)
        : new PolicyError('key_already_revoked', `key ${keyId} is already revoked`);
    }
    const stored = await this.workloads.apiKeyById(keyId);
    return apiKeyJson(stored ?? result.key);
  }
}
