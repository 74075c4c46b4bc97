import { Inject, Injectable } from '@nestjs/common';
import { ControlThresholdsBody, controlThresholdsDto, controlThresholdsOf } from '@gateway/contracts';
import { ControlsRepository } from '@gateway/db';
import { controlThresholdProblems, DEFAULT_CONTROL_THRESHOLDS, DomainError } from '@gateway/domain';
import type { Operator } from '@gateway/service-kit';
import { Clock, CLOCK } from '@gateway/service-kit';
import { PolicyError } from '../../policy.errors';
import { parseValue, resourceId } from '../input';

export type ControlThresholdStore = Pick<ControlsRepository, 'thresholdsOf' | 'putThresholds'>;

/**
 * A workload's daily-control thresholds (issue 13). Fields left out keep the defaults (not the
 * previous values: a PUT states the whole document). Thresholds only decide when an alert is
 * raised, never what may be admitted or spent, so no change to them is a spend raise and none
 * needs a second operator, lowering or raising alike.
 */
@Injectable()
export class PutControlThresholds {
  constructor(
    @Inject(ControlsRepository) private readonly store: ControlThresholdStore,
    @Inject(CLOCK) private readonly clock: Clock,
  ) {}

  async execute(op: Operator, workloadId: string, cmd: ControlThresholdsBody) {
    parseValue(resourceId, workloadId, 'id');
    const { reason, ...doc } = cmd;
    const thresholds = controlThresholdsOf(doc, DEFAULT_CONTROL_THRESHOLDS);
    const problems = controlThresholdProblems(thresholds);
    if (problems.length > 0) throw new DomainError('invalid_request', `${problems[0].param}: ${problems[0].message}`, problems[0].param);
    if (!(await this.store.thresholdsOf(workloadId)).exists) throw new PolicyError('not_found', `no workload ${workloadId}`);
    await this.store.putThresholds({
      workloadId,
      thresholds: controlThresholdsDto(thresholds),
      actor: op.subject,
      reason,
      now: this.clock.now(),
    });
    return this.get(workloadId);
  }

  async get(workloadId: string) {
    parseValue(resourceId, workloadId, 'id');
    const stored = await this.store.thresholdsOf(workloadId);
    if (!stored.exists) throw new PolicyError('not_found', `no workload ${workloadId}`);
    const doc = stored.thresholds as Parameters<typeof controlThresholdsOf>[0];
    return {
      workload_id: workloadId,
      thresholds: controlThresholdsDto(controlThresholdsOf(doc, DEFAULT_CONTROL_THRESHOLDS)),
      defaults: stored.thresholds === null,
      updated_at: stored.updatedAt?.toISOString() ?? null,
      updated_by: stored.updatedBy,
    };
  }
}
