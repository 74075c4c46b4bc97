import { Inject, Injectable } from '@nestjs/common';
import { PolicyRepository } from '@gateway/db';
import type { Operator } from '@gateway/service-kit';
import { Clock, CLOCK, IdGenerator, InjectIds } from '@gateway/service-kit';
import { PolicyError } from '../../policy.errors';
import { assertUpstreamAllowed, InjectUpstreamAllowlist } from '../../upstream-allowlist';
import type { RouteStore } from '../../ports';
import { toContractInput } from '../route-contract.schema';
import { routeJson } from '../views';
import { CreateRouteCommand } from './create-route.command';

/** Creates a route and its contract version 1, unverified until an operator verifies it. */
@Injectable()
export class CreateRoute {
  constructor(
    @Inject(PolicyRepository) private readonly routes: RouteStore,
    @Inject(CLOCK) private readonly clock: Clock,
    @InjectIds() private readonly ids: IdGenerator,
    @InjectUpstreamAllowlist() private readonly allowlist: readonly string[],
  ) {}

  async execute(op: Operator, cmd: CreateRouteCommand) {
    const now = this.clock.now();
    assertUpstreamAllowed(cmd.upstream_base_url, this.allowlist);
    const routeId = cmd.id ?? this.ids.next();
    const result = await this.routes.createRoute(toContractInput(routeId, cmd.alias, cmd, op.subject, cmd.reason ?? 'route created'), now);
    if (!result.ok) {
      throw result.reason === 'id_taken'
        ? new PolicyError('route_exists', `route ${routeId} already exists; change its contract with PUT /routes/${routeId}/contract`, 'id')
        : new PolicyError('alias_taken', `alias '${cmd.alias}' is already mapped to another route`, 'alias');
    }
    const route = await this.routes.routeById(routeId);
    if (!route) throw new Error(`route ${routeId} vanished after creation`);
    return routeJson(route, now);
  }
}
