import { Inject, Injectable } from '@nestjs/common';
import { PolicyRepository } from '@gateway/db';
import { Clock, CLOCK } from '@gateway/service-kit';
import type { RouteStore } from '../../ports';
import { routeSummaryJson } from '../views';

/** Every route with its current contract and verification state (verified / unverified / stale). */
@Injectable()
export class ListRoutes {
  constructor(
    @Inject(PolicyRepository) private readonly routes: RouteStore,
    @Inject(CLOCK) private readonly clock: Clock,
  ) {}

  async execute() {
    const now = this.clock.now();
    return { routes: (await this.routes.listRoutes()).map((r) => routeSummaryJson(r, now)) };
  }
}
