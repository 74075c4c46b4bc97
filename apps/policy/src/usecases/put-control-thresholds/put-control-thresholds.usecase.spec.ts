import { controlThresholdsBody } from '@gateway/contracts';
import { DomainError } from '@gateway/domain';
import type { Operator } from '@gateway/service-kit';
import { ControlThresholdStore, PutControlThresholds } from './put-control-thresholds.usecase';

const NOW = new Date('2026-11-09T03:00:00Z');
const op: Operator = { subject: 'ops-anna', roles: ['operator'] } as Operator;

function store(exists = true) {
  const rows = new Map<string, { thresholds: unknown; by: string }>();
  const s: ControlThresholdStore = {
    thresholdsOf: async (id) =>
      exists
        ? {
            exists,
            thresholds: rows.get(id)?.thresholds ?? null,
            updatedAt: rows.has(id) ? NOW : null,
            updatedBy: rows.get(id)?.by ?? null,
          }
        : { exists: false, thresholds: null, updatedAt: null, updatedBy: null },
    putThresholds: async (c) => void rows.set(c.workloadId, { thresholds: c.thresholds, by: c.actor }),
  };
  return { s, rows };
}

describe('PutControlThresholds', () => {
  const clock = { now: () => NOW };

  it('answers the defaults until set, then the stored document with absent fields defaulted; no second operator', async () => {
    const { s } = store();
    const uc = new PutControlThresholds(s, clock);
    expect(await uc.get('wl-a')).toMatchObject({ defaults: true, thresholds: { shift: { min_sample: 200 }, exception_budget_share: 0.8 } });
    const body = controlThresholdsBody.parse({ shift: { min_sample: 50 }, exception_budget_share: 0.5, reason: 'small workload' });
    expect(await uc.execute(op, 'wl-a', body)).toMatchObject({
      defaults: false,
      updated_by: 'ops-anna',
      thresholds: {
        shift: { min_sample: 50, min_distance: 0.1, significance: 0.01 },
        exception_budget_share: 0.5,
        output_p95_max_tokens: null,
      },
    });
  });

  it('refuses out-of-range thresholds with invalid_request naming the field, and an unknown workload with not_found', async () => {
    const uc = new PutControlThresholds(store().s, clock);
    await expect(uc.execute(op, 'wl-a', controlThresholdsBody.parse({ shift: { significance: 0.3 }, reason: 'x' }))).rejects.toMatchObject({
      code: 'invalid_request',
      param: 'shift.significance',
    });
    await expect(uc.execute(op, 'wl-a', controlThresholdsBody.parse({ refusal: { min_increase: 2 }, reason: 'x' }))).rejects.toBeInstanceOf(
      DomainError,
    );
    await expect(new PutControlThresholds(store(false).s, clock).get('wl-x')).rejects.toMatchObject({ code: 'not_found' });
  });

  it('takes no unknown field and requires a reason', () => {
    expect(controlThresholdsBody.safeParse({ shift: { min_sample: 10 } }).success).toBe(false);
    expect(controlThresholdsBody.safeParse({ reason: 'x', shift: { minSample: 10 } }).success).toBe(false);
  });
});
