import { Inject, Injectable } from '@nestjs/common';
import { ChangeRequestRepository, isUniqueViolation, PolicyRepository, Tx } from '@gateway/db';
import { contractSpendRaises } from '@gateway/domain';
import type { Operator } from '@gateway/service-kit';
import { Clock, CLOCK, IdGenerator, InjectIds } from '@gateway/service-kit';
import { PolicyError } from '../../policy.errors';
import { assertUpstreamAllowed, InjectUpstreamAllowlist } from '../../upstream-allowlist';
import type { ChangeRequestStore, RouteStore } from '../../ports';
import { requestChange } from '../change-requests';
import { contractDiffers, toContractInput } from '../route-contract.schema';
import { currentVersionOf, routeJson } from '../views';
import { UpdateRouteContractCommand } from './update-route-contract.command';

/**
 * Replaces a route's contract. Versions are immutable: any change (provider, model, gateway or
 * client-library version, cap semantics, ...) appends a new, unverified version, so multi-candidate
 * traffic fails closed until someone verifies it again. Re-sending the current contract is a no-op.
 * A contract that sends traffic elsewhere (upstream URL, provider or model) becomes a change
 * request for a second operator.
 */
@Injectable()
export class UpdateRouteContract {
  constructor(
    @Inject(PolicyRepository) private readonly routes: RouteStore,
    @Inject(CLOCK) private readonly clock: Clock,
    @InjectUpstreamAllowlist() private readonly allowlist: readonly string[],
    @Inject(ChangeRequestRepository) private readonly changes: ChangeRequestStore,
    @InjectIds() private readonly ids: IdGenerator,
  ) {}

  async execute(op: Operator, routeId: string, sent: UpdateRouteContractCommand) {
    const now = this.clock.now();
    const cmd = await this.keepWhenOmitted(routeId, sent);
    const prepared = await this.prepare(routeId, cmd);
    if (!prepared.changed) return { ...routeJson(prepared.route, now), changed: false };
    const current = currentVersionOf(prepared.route);
    const raises = contractSpendRaises(current, {
      providerKind: cmd.provider_kind,
      upstreamBaseUrl: cmd.upstream_base_url,
      upstreamModel: cmd.upstream_model,
      credentialRef: cmd.credential_ref,
      pricedFeatures: cmd.priced_features,
      imageInputTokens: cmd.image_input_tokens,
      audioInputTokens: cmd.audio_input_tokens,
      videoInputTokens: cmd.video_input_tokens,
      documentInputTokens: cmd.document_input_tokens,
    });
    if (raises.length > 0) {
      return requestChange(
        this.changes,
        this.ids,
        op,
        { kind: 'route_contract', targetId: routeId, command: cmd, raises, reason: cmd.reason ?? 'contract changed' },
        now,
      );
    }
    await this.write(routeId, prepared.alias, cmd, op.subject, cmd.reason ?? 'contract changed', now);
    const updated = await this.routes.routeById(routeId);
    if (!updated) throw new Error(`route ${routeId} vanished after a contract change`);
    return { ...routeJson(updated, now), changed: true };
  }

  /** The approved contract: validated again and appended inside the approving transaction. */
  async applyApproved(actor: string, reason: string, routeId: string, cmd: UpdateRouteContractCommand, now: Date, tx: Tx): Promise<void> {
    const prepared = await this.prepare(routeId, cmd);
    if (prepared.changed) await this.write(routeId, prepared.alias, cmd, actor, reason, now, tx);
  }

  /**
   * `credential_ref` and `upstream_idempotency_header` left out of a PUT keep the route's (null
   * removes them), so a contract edit by someone who never saw them does not silently drop them.
   * The change request stores the resolved values, so an approval applies exactly what was shown.
   */
  private async keepWhenOmitted(routeId: string, cmd: UpdateRouteContractCommand): Promise<UpdateRouteContractCommand> {
    if (cmd.credential_ref !== undefined && cmd.upstream_idempotency_header !== undefined) return cmd;
    const route = await this.routes.routeById(routeId);
    if (!route) return cmd;
    const current = currentVersionOf(route);
    return {
      ...cmd,
      credential_ref: cmd.credential_ref !== undefined ? cmd.credential_ref : (current.credentialRef ?? null),
      upstream_idempotency_header:
        cmd.upstream_idempotency_header !== undefined ? cmd.upstream_idempotency_header : (current.upstreamIdempotencyHeader ?? null),
    };
  }

  private async prepare(routeId: string, cmd: UpdateRouteContractCommand) {
    assertUpstreamAllowed(cmd.upstream_base_url, this.allowlist);
    const route = await this.routes.routeById(routeId);
    if (!route) throw new PolicyError('not_found', `route ${routeId} not found`);
    const alias = cmd.alias ?? route.alias;
    if (alias === route.alias && !contractDiffers(currentVersionOf(route), cmd)) return { route, alias, changed: false };
    if (alias !== route.alias) {
      const owner = await this.routes.routeIdByAlias(alias);
      if (owner !== null && owner !== routeId)
        throw new PolicyError('alias_taken', `alias '${alias}' is already mapped to route ${owner}`, 'alias');
    }
    return { route, alias, changed: true };
  }

  private async write(routeId: string, alias: string, cmd: UpdateRouteContractCommand, actor: string, reason: string, now: Date, tx?: Tx) {
    try {
      await this.routes.putRouteContract(toContractInput(routeId, alias, cmd, actor, reason), now, tx);
    } catch (err) {
      if (isUniqueViolation(err)) throw new PolicyError('alias_taken', `alias '${alias}' is already mapped to another route`, 'alias');
      throw err;
    }
  }
}
