import { Inject, Injectable } from '@nestjs/common';
import { PolicyRepository } from '@gateway/db';
import { DomainError } from '@gateway/domain';
import type { Operator } from '@gateway/service-kit';
import { Clock, CLOCK } from '@gateway/service-kit';
import { PolicyError } from '../../policy.errors';
import type { RouteStore } from '../../ports';
import { PROBE_CANDIDATES, RouteProbe } from '../../probe/route-probe';
import { currentVersionOf, routeJson } from '../views';
import { probeVerdict } from './probe-verdict';
import { VerifyRouteCommand } from './verify-route.command';

/**
 * Records that someone checked the route's current contract (verified_at / verified_by), which
 * starts its verification TTL. With `probe: true` the claim is tested first: a tiny request
 * with 2 candidates goes upstream, and a route that does not return 2 candidates with aggregate
 * usage is refused (its evidence is still kept on the version, under `last_failed_probe`).
 */
@Injectable()
export class VerifyRoute {
  constructor(
    @Inject(PolicyRepository) private readonly routes: RouteStore,
    @Inject(RouteProbe) private readonly probe: Pick<RouteProbe, 'run'>,
    @Inject(CLOCK) private readonly clock: Clock,
  ) {}

  async execute(op: Operator, routeId: string, cmd: VerifyRouteCommand) {
    const route = await this.routes.routeById(routeId);
    if (!route) throw new PolicyError('not_found', `route ${routeId} not found`);
    const contract = currentVersionOf(route);
    if (cmd.version !== undefined && cmd.version !== contract.version) {
      throw new PolicyError(
        'version_not_current',
        `version ${cmd.version} is not current; route ${routeId} is at version ${contract.version}`,
        'version',
      );
    }
    const notes: Record<string, unknown> = { method: cmd.probe ? 'automated_probe' : 'operator_review', notes: cmd.notes ?? null };
    if (cmd.probe) {
      if (contract.maxCandidates < PROBE_CANDIDATES) {
        throw new DomainError(
          'invalid_request',
          `the probe asks for ${PROBE_CANDIDATES} candidates, but the contract declares max_candidates ${contract.maxCandidates}; verify without a probe`,
          'probe',
        );
      }
      const observation = await this.probe.run({ routeId, alias: route.alias, contract });
      const verdict = probeVerdict(observation, contract.outputCapSemantics);
      const evidence = {
        ...observation,
        passed: verdict.passed,
        problems: verdict.problems,
        at: this.clock.now().toISOString(),
        by: op.subject,
      };
      if (!verdict.passed) {
        await this.routes.recordVerificationNotes(routeId, contract.version, {
          ...asRecord(contract.verificationNotes),
          last_failed_probe: evidence,
        });
        throw new PolicyError(
          'probe_failed',
          `route ${routeId} version ${contract.version} failed the probe: ${verdict.problems.join('; ')}; not verified`,
        );
      }
      notes.probe = evidence;
    }
    const now = this.clock.now();
    const result = await this.routes.verifyCurrentVersion(routeId, contract.version, op.subject, notes, now);
    switch (result) {
      case 'verified':
        break;
      case 'not_found':
        throw new PolicyError('not_found', `route ${routeId} not found`);
      case 'not_current':
        throw new PolicyError(
          'version_not_current',
          `the contract of route ${routeId} changed while it was being verified; review the new version`,
        );
      default: {
        const unreachable: never = result;
        throw new Error(`Unhandled verification result: ${String(unreachable)}`);
      }
    }
    const verified = await this.routes.routeById(routeId);
    if (!verified) throw new Error(`route ${routeId} vanished after verification`);
    return routeJson(verified, now);
  }
}

function asRecord(v: unknown): Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
}
