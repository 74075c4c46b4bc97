import { Inject, Injectable } from '@nestjs/common';
import { ChangeRequestRepository } from '@gateway/db';
import type { ChangeRequestStatus } from '@gateway/domain';
import type { ChangeRequestStore } from '../../ports';
import { changeRequestJson } from '../change-requests';

/** Change requests, newest first, optionally by status (the four-eyes audit trail). */
@Injectable()
export class ListChangeRequests {
  constructor(@Inject(ChangeRequestRepository) private readonly changes: ChangeRequestStore) {}

  async execute(filter: { status: ChangeRequestStatus | null; limit: number }) {
    const rows = await this.changes.list({ ...(filter.status ? { status: filter.status } : {}), limit: filter.limit });
    return { change_requests: rows.map(changeRequestJson) };
  }
}
