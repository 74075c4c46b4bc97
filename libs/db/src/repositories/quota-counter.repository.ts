import { COUNTER_SCOPES, InstanceCounter } from '@gateway/domain';
import { Database } from '../database';

/**
 * The quota-counter aggregate's read side for reports. Admission's conditional upserts of the
 * counters live in its one statement (AdmissionRepository); nothing here writes.
 */
export class QuotaCounterRepository {
  constructor(private readonly db: Database) {}

  /**
   * Every token counter a gateway instance kept for a team or an environment (instance_id set),
   * in windows starting at or after `since`, with the limit in force now.
   */
  async instanceScopedTokenCounters(since: Date): Promise<InstanceCounter[]> {
    const rows = await this.db.prisma.$queryRaw<
      Array<{ scope: string; scope_id: string; window_start: Date; instance_id: string; tokens: number; limit: number | null }>
    >`
      SELECT c.scope, c.scope_id, c.window_start, c.instance_id, c.tokens, l.tokens_per_minute AS "limit"
      FROM quota_counter c
      LEFT JOIN scope_limit l ON l.scope_id = c.scope_id
        AND l.scope = CASE c.scope WHEN ${COUNTER_SCOPES.team} THEN 'team' WHEN ${COUNTER_SCOPES.environment} THEN 'environment' END
      WHERE c.instance_id <> '' AND c.scope IN (${COUNTER_SCOPES.team}, ${COUNTER_SCOPES.environment}) AND c.window_start >= ${since}
      ORDER BY c.window_start DESC, c.scope, c.scope_id, c.instance_id`;
    return rows.map((r) => ({
      scope: r.scope === COUNTER_SCOPES.team ? 'team' : 'environment',
      scopeId: r.scope_id,
      windowStart: r.window_start,
      instanceId: r.instance_id,
      tokens: Number(r.tokens),
      limit: r.limit === null ? null : Number(r.limit),
    }));
  }
}
