import { bucketAfter, fullBucket, OverloadBucket, OverloadBucketPolicy } from '@gateway/domain';

/** How many recent outcomes and primary latencies each route keeps (per dispatch instance). */
const WINDOW = 200;

/**
 * What one dispatch instance knows of a route from its own traffic: recent primary latencies (for
 * a quantile hedge delay), the recent error rate, attempts in flight and the gRPC A6 overload
 * bucket. Per instance and in memory on purpose (issue 10's interface): only what must be
 * serialised (winner, allowance, budget) is decided in Postgres; these are stop conditions that a
 * restart may forget, which only makes the instance more cautious (quantile delays fall back to
 * their ceiling) or, for the bucket, as permissive as a fresh route.
 */
export class RouteHealth {
  private readonly routes = new Map<string, RouteState>();

  started(routeId: string): void {
    this.state(routeId).inFlight += 1;
  }

  /**
   * An attempt on the route ended. `failure`: the provider failed (error answer, no answer);
   * cancelled attempts are neither (the gateway stopped them). `primaryLatencyMs` is kept for a
   * primary that got an answer.
   */
  ended(
    routeId: string,
    outcome: 'success' | 'failure' | 'cancelled',
    bucket: OverloadBucketPolicy | null,
    primaryLatencyMs: number | null,
  ): void {
    const s = this.state(routeId);
    s.inFlight = Math.max(0, s.inFlight - 1);
    if (outcome === 'cancelled') return;
    push(s.outcomes, outcome === 'failure');
    if (primaryLatencyMs !== null) push(s.latencies, primaryLatencyMs);
    if (bucket) s.bucket = bucketAfter(s.bucket ?? fullBucket(bucket), outcome, bucket);
  }

  latencies(routeId: string): readonly number[] {
    return this.state(routeId).latencies;
  }

  /** The facts `decideHedge` reads for the route; the bucket starts full under `bucket`'s size. */
  facts(routeId: string, bucket: OverloadBucketPolicy): { errorPerMille: number; inFlight: number; bucket: OverloadBucket } {
    const s = this.state(routeId);
    const failures = s.outcomes.filter(Boolean).length;
    return {
      errorPerMille: s.outcomes.length === 0 ? 0 : Math.floor((failures * 1000) / s.outcomes.length),
      inFlight: s.inFlight,
      bucket: s.bucket ?? fullBucket(bucket),
    };
  }

  private state(routeId: string): RouteState {
    let s = this.routes.get(routeId);
    if (!s) {
      s = { inFlight: 0, outcomes: [], latencies: [], bucket: null };
      this.routes.set(routeId, s);
    }
    return s;
  }
}

interface RouteState {
  inFlight: number;
  /** true = failure, newest last */
  outcomes: boolean[];
  latencies: number[];
  bucket: OverloadBucket | null;
}

function push<T>(ring: T[], v: T): void {
  ring.push(v);
  if (ring.length > WINDOW) ring.shift();
}
