import { InstanceCounter } from '@gateway/domain';
import { Metrics } from '@gateway/service-kit';
import { ReconciliationMetrics } from '../../reconciliation.metrics';
import { InstanceCounterPort, ReconcileInstanceCounters } from './reconcile-instance-counters.usecase';

const NOW = new Date('2026-12-01T10:05:30Z');

class FakeCounters implements InstanceCounterPort {
  readonly queries: Date[] = [];
  constructor(private readonly rows: InstanceCounter[]) {}
  async instanceScopedTokenCounters(since: Date): Promise<InstanceCounter[]> {
    this.queries.push(since);
    return this.rows.filter((r) => r.windowStart >= since);
  }
}

describe('ReconcileInstanceCounters', () => {
  const w = (m: number) => new Date(Date.UTC(2026, 11, 1, 10, m));
  const rows: InstanceCounter[] = [
    { scope: 'team', scopeId: 'pay', windowStart: w(5), instanceId: 'adm-1', tokens: 800, limit: 1000 },
    { scope: 'team', scopeId: 'pay', windowStart: w(5), instanceId: 'adm-2', tokens: 900, limit: 1000 },
    { scope: 'team', scopeId: 'pay', windowStart: w(4), instanceId: 'adm-1', tokens: 50, limit: 1000 },
  ];

  const setup = () => {
    const metrics = new Metrics('test');
    const m = new ReconciliationMetrics(metrics);
    const counters = new FakeCounters(rows);
    return { metrics, counters, usecase: new ReconcileInstanceCounters(counters, m) };
  };

  it('reports each window summed over instances, names instance counters as such, and publishes the newest window', async () => {
    const { usecase, metrics, counters } = setup();
    const report = await usecase.execute(NOW);
    expect(counters.queries).toEqual([new Date('2026-12-01T09:55:30Z')]);
    expect(report.windows[0]).toEqual({
      scope: 'team:pay',
      window_start: '2026-12-01T10:05:00.000Z',
      enforcement: 'instance',
      instances: [
        { quota_scope: 'instance:adm-1/team:pay', tokens: 800 },
        { quota_scope: 'instance:adm-2/team:pay', tokens: 900 },
      ],
      organisation_tokens: 1700,
      largest_instance_tokens: 900,
      unseen_by_any_instance_tokens: 800,
      tokens_per_minute_limit: 1000,
      over_limit_tokens: 700,
    });
    expect(report.windows).toHaveLength(2);
    const text = await metrics.registry.metrics();
    expect(text).toMatch(/^gateway_quota_instance_scoped_tokens\{[^}]*scope="team:pay"[^}]*\} 1700$/m);
    expect(text).toMatch(/^gateway_quota_instance_scoped_over_limit_tokens\{[^}]*scope="team:pay"[^}]*\} 700$/m);
  });

  it.each(['yesterday', '2026-11-29T00:00:00Z'])('refuses since=%s (not an instant within 24 hours)', async (since) => {
    const { usecase } = setup();
    await expect(usecase.execute(NOW, { since })).rejects.toMatchObject({ code: 'invalid_request', param: 'since' });
  });
});
