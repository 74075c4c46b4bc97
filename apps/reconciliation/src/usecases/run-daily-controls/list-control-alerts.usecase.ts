import { Inject, Injectable } from '@nestjs/common';
import { ControlsRepository } from '@gateway/db';
import { DomainError } from '@gateway/domain';
import { alertDto, controlsDay } from './run-daily-controls.usecase';

/** `GET /controls/alerts`: stored alerts, filtered by day and workload. */
@Injectable()
export class ListControlAlerts {
  constructor(@Inject(ControlsRepository) private readonly controls: Pick<ControlsRepository, 'listAlerts'>) {}

  async execute(q: { day?: string; workload_id?: string }, now: Date) {
    const day = q.day === undefined ? undefined : controlsDay(q.day, now);
    if (q.workload_id !== undefined && !/^[\w.:-]{1,128}$/.test(q.workload_id))
      throw new DomainError('invalid_request', 'workload_id: not a workload id', 'workload_id');
    const rows = await this.controls.listAlerts({ day, workloadId: q.workload_id, limit: 1000 });
    return { alerts: rows.map(alertDto) };
  }
}
