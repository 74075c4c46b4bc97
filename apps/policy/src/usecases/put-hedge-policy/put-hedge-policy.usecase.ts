import { Inject, Injectable } from '@nestjs/common';
import { ChangeRequestRepository, HedgePolicyRepository, hedgeScopeId, PolicyRepository, Tx } from '@gateway/db';
import { hedgePolicyFromWire } from '@gateway/contracts';
import { hedgePolicySpendRaises, sameHedgeSettings } from '@gateway/domain';
import type { Operator } from '@gateway/service-kit';
import { Clock, CLOCK, IdGenerator, InjectIds } from '@gateway/service-kit';
import { PolicyError } from '../../policy.errors';
import type { ChangeRequestStore, HedgePolicyStore, RouteStore, WorkloadStore } from '../../ports';
import { changeRequestJson, PendingChange, requestChange } from '../change-requests';
import { parseValue, resourceId } from '../input';
import { hedgePolicyJson } from '../views';
import { putHedgePolicyBody, PutHedgePolicyCommand } from './put-hedge-policy.command';

/**
 * Writes a workload's hedge policy (issue 10) as a new revision of its scope: the workload, or one
 * route of it. The proposal is compared with the policy in force on that scope (for a route
 * without its own policy, the workload-wide one): a change that lets extra attempts spend more
 * becomes a change request for a second operator, one that only lowers applies at once.
 * Change requests name their target `<workload>` or `<workload>/<route>`.
 */
@Injectable()
export class PutHedgePolicy {
  constructor(
    @Inject(HedgePolicyRepository) private readonly hedging: HedgePolicyStore,
    @Inject(PolicyRepository) private readonly policy: Pick<WorkloadStore & RouteStore, 'workloadById' | 'routeById'>,
    @Inject(ChangeRequestRepository) private readonly changes: ChangeRequestStore,
    @Inject(CLOCK) private readonly clock: Clock,
    @InjectIds() private readonly ids: IdGenerator,
  ) {}

  async execute(op: Operator, workloadId: string, cmd: PutHedgePolicyCommand) {
    parseValue(resourceId, workloadId, 'id');
    await this.requireScope(workloadId, cmd.route_id);
    const now = this.clock.now();
    const reason = cmd.reason ?? 'hedge policy revision';
    const proposed = hedgePolicyFromWire(cmd);
    const inForce = await this.hedging.hedgePolicyFor(workloadId, cmd.route_id);
    // PUT is idempotent: the scope's own policy, said again, is not a new revision
    if (inForce && inForce.routeId === cmd.route_id && sameHedgeSettings(inForce, proposed)) return hedgePolicyJson(inForce);
    const raises = hedgePolicySpendRaises(inForce, proposed);
    if (raises.length > 0) {
      const targetId = hedgeScopeId(workloadId, cmd.route_id);
      const waiting = await this.pendingSame(op, targetId, cmd);
      if (waiting) return waiting;
      return requestChange(this.changes, this.ids, op, { kind: 'hedge_policy', targetId, command: cmd, raises, reason }, now);
    }
    return hedgePolicyJson(await this.append(op.subject, reason, workloadId, cmd, now));
  }

  /** The approved revision, appended inside the approving transaction (the target names the workload, the command the route). */
  async applyApproved(actor: string, reason: string, targetId: string, cmd: PutHedgePolicyCommand, now: Date, tx: Tx): Promise<void> {
    const slash = targetId.indexOf('/');
    await this.append(actor, reason, slash < 0 ? targetId : targetId.slice(0, slash), cmd, now, tx);
  }

  /** The policies in force (workload-wide first, then one per route) and every revision. */
  async get(workloadId: string) {
    if (!(await this.policy.workloadById(workloadId))) throw new PolicyError('not_found', `workload ${workloadId} not found`);
    const history = await this.hedging.history(workloadId);
    const inForce = history.filter((r, i) => i === 0 || history[i - 1].routeId !== r.routeId);
    return { workload_id: workloadId, in_force: inForce.map(hedgePolicyJson), history: history.map(hedgePolicyJson) };
  }

  /**
   * The requester's pending request for the same policy on the same scope, if a retried PUT already
   * filed it (among the most recent pending requests: a retry comes soon after its original).
   */
  private async pendingSame(op: Operator, targetId: string, cmd: PutHedgePolicyCommand): Promise<PendingChange | null> {
    const proposed = hedgePolicyFromWire(cmd);
    for (const c of await this.changes.list({ status: 'pending', limit: 200 })) {
      if (c.kind !== 'hedge_policy' || c.targetId !== targetId || c.requestedBy !== op.subject) continue;
      const filed = putHedgePolicyBody.safeParse(c.proposed);
      if (filed.success && filed.data.route_id === cmd.route_id && sameHedgeSettings(hedgePolicyFromWire(filed.data), proposed)) {
        return new PendingChange(changeRequestJson(c));
      }
    }
    return null;
  }

  private async requireScope(workloadId: string, routeId: string | null): Promise<void> {
    if (!(await this.policy.workloadById(workloadId))) throw new PolicyError('not_found', `workload ${workloadId} not found`);
    if (routeId !== null && !(await this.policy.routeById(routeId)))
      throw new PolicyError('not_found', `route ${routeId} not found`, 'route_id');
  }

  private async append(actor: string, reason: string, workloadId: string, cmd: PutHedgePolicyCommand, now: Date, tx?: Tx) {
    const result = await this.hedging.append(
      { ...hedgePolicyFromWire(cmd), revisionId: this.ids.next(), workloadId, routeId: cmd.route_id, createdBy: actor, reason },
      now,
      tx,
    );
    if (!result.ok) throw new PolicyError('not_found', `workload ${workloadId} not found`);
    return result.revision;
  }
}
