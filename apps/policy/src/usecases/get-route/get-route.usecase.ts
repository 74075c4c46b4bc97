import { Inject, Injectable } from '@nestjs/common';
import { PolicyRepository } from '@gateway/db';
import { Clock, CLOCK } from '@gateway/service-kit';
import { PolicyError } from '../../policy.errors';
import type { RouteStore } from '../../ports';
import { routeJson } from '../views';

/** One route with every contract version and its verification state as of now. */
@Injectable()
export class GetRoute {
  constructor(
    @Inject(PolicyRepository) private readonly routes: RouteStore,
    @Inject(CLOCK) private readonly clock: Clock,
  ) {}

  async execute(routeId: string) {
    const route = await this.routes.routeById(routeId);
    if (!route) throw new PolicyError('not_found', `route ${routeId} not found`);
    return routeJson(route, this.clock.now());
  }
}
