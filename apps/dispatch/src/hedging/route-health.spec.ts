import { bucketAllowsExtraAttempts, OverloadBucketPolicy } from '@gateway/domain';
import { RouteHealth } from './route-health';

const BUCKET: OverloadBucketPolicy = { maxMilliTokens: 4_000, successRefillMilliTokens: 500 };

describe('RouteHealth: what one instance knows of a route', () => {
  it('counts attempts in flight per route', () => {
    const h = new RouteHealth();
    h.started('a');
    h.started('a');
    h.started('b');
    h.ended('a', 'success', BUCKET, null);
    expect(h.facts('a', BUCKET).inFlight).toBe(1);
    expect(h.facts('b', BUCKET).inFlight).toBe(1);
  });

  it('error rate per mille over recent outcomes; cancelled attempts are neither success nor failure', () => {
    const h = new RouteHealth();
    for (const outcome of ['failure', 'success', 'success', 'success', 'cancelled'] as const) {
      h.started('a');
      h.ended('a', outcome, BUCKET, null);
    }
    expect(h.facts('a', BUCKET).errorPerMille).toBe(250);
    expect(h.facts('unknown', BUCKET)).toEqual({ errorPerMille: 0, inFlight: 0, bucket: { milliTokens: 4_000 } });
  });

  it('keeps only the most recent 200 outcomes and latencies', () => {
    const h = new RouteHealth();
    for (let i = 0; i < 250; i++) {
      h.started('a');
      h.ended('a', i < 50 ? 'failure' : 'success', null, i);
    }
    expect(h.facts('a', BUCKET).errorPerMille).toBe(0);
    expect(h.latencies('a')).toHaveLength(200);
    expect(h.latencies('a')[0]).toBe(50);
  });

  it('the A6 bucket drains on failures and stops extra attempts at half; successes refill it', () => {
    const h = new RouteHealth();
    const fail = () => {
      h.started('a');
      h.ended('a', 'failure', BUCKET, null);
    };
    fail();
    expect(bucketAllowsExtraAttempts(h.facts('a', BUCKET).bucket, BUCKET)).toBe(true);
    fail();
    expect(h.facts('a', BUCKET).bucket).toEqual({ milliTokens: 2_000 });
    expect(bucketAllowsExtraAttempts(h.facts('a', BUCKET).bucket, BUCKET)).toBe(false);
    h.started('a');
    h.ended('a', 'success', BUCKET, 40);
    expect(bucketAllowsExtraAttempts(h.facts('a', BUCKET).bucket, BUCKET)).toBe(true);
  });
});
