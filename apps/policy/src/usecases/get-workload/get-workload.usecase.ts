import { Inject, Injectable } from '@nestjs/common';
import { PolicyRepository } from '@gateway/db';
import { PolicyError } from '../../policy.errors';
import type { WorkloadStore } from '../../ports';
import { workloadJson } from '../views';

/** A workload's policy and its keys (prefixes and status only; a key is never shown again). */
@Injectable()
export class GetWorkload {
  constructor(@Inject(PolicyRepository) private readonly workloads: WorkloadStore) {}

  async execute(workloadId: string) {
    const w = await this.workloads.workloadById(workloadId);
    if (!w) throw new PolicyError('not_found', `workload ${workloadId} not found`);
    return workloadJson(w);
  }
}
