import { Inject, Injectable } from '@nestjs/common';
import { isUniqueViolation, PolicyRepository } from '@gateway/db';
import type { Operator } from '@gateway/service-kit';
import { Clock, CLOCK } from '@gateway/service-kit';
import { PolicyError } from '../../policy.errors';
import { assertUpstreamAllowed, InjectUpstreamAllowlist } from '../../upstream-allowlist';
import type { RouteStore } from '../../ports';
import { contractDiffers, toContractInput } from '../route-contract.schema';
import { currentVersionOf, routeJson } from '../views';
import { UpdateRouteContractCommand } from './update-route-contract.command';

/**
 * Replaces a route's contract. Versions are immutable: any change (provider, model, gateway or
 * client-library version, cap semantics, ...) appends a new, unverified version, so multi-candidate
 * traffic fails closed until someone verifies it again. Re-sending the current contract is a no-op.
 */
@Injectable()
export class UpdateRouteContract {
  constructor(
    @Inject(PolicyRepository) private readonly routes: RouteStore,
    @Inject(CLOCK) private readonly clock: Clock,
    @InjectUpstreamAllowlist() private readonly allowlist: readonly string[],
  ) {}

  async execute(op: Operator, routeId: string, cmd: UpdateRouteContractCommand) {
    const now = this.clock.now();
    assertUpstreamAllowed(cmd.upstream_base_url, this.allowlist);
    const route = await this.routes.routeById(routeId);
    if (!route) throw new PolicyError('not_found', `route ${routeId} not found`);
    const alias = cmd.alias ?? route.alias;
    if (alias === route.alias && !contractDiffers(currentVersionOf(route), cmd)) {
      return { ...routeJson(route, now), changed: false };
    }
    if (alias !== route.alias) {
      const owner = await this.routes.routeIdByAlias(alias);
      if (owner !== null && owner !== routeId)
        throw new PolicyError('alias_taken', `alias '${alias}' is already mapped to route ${owner}`, 'alias');
    }
    try {
      await this.routes.putRouteContract(toContractInput(routeId, alias, cmd, op.subject, cmd.reason ?? 'contract changed'), now);
    } catch (err) {
      if (isUniqueViolation(err)) throw new PolicyError('alias_taken', `alias '${alias}' is already mapped to another route`, 'alias');
      throw err;
    }
    const updated = await this.routes.routeById(routeId);
    if (!updated) throw new Error(`route ${routeId} vanished after a contract change`);
    return { ...routeJson(updated, now), changed: true };
  }
}
