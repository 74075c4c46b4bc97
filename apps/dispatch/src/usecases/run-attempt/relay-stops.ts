/** How long a stop is remembered for an action this instance is not (yet) streaming. */
export const RELAY_STOP_TTL_MS = 10 * 60 * 1000;
/** At most this many such stops are remembered; the oldest go first. */
export const RELAY_STOPS_MAX = 10_000;

/**
 * The streams whose client is gone (`gateway.dispatch.controls.v1`, from admission): their chunks
 * are not relayed. Every dispatch instance hears every stop; the one streaming the action acts on
 * it. A stop can come before its command is claimed here (the two travel on different topics), so
 * it is remembered for a while even when no stream of that action runs; a stop for an action that
 * runs elsewhere, or never, expires unused. Memory is bounded either way. One per process
 * (DispatchModule provides it as a value).
 */
export class RelayStops {
  /** action id → when the stop expires (ms); insertion order is arrival order */
  private readonly stops = new Map<string, number>();

  constructor(
    private readonly ttlMs = RELAY_STOP_TTL_MS,
    private readonly max = RELAY_STOPS_MAX,
  ) {}

  stop(actionId: string, nowMs: number): void {
    this.stops.delete(actionId);
    this.stops.set(actionId, nowMs + this.ttlMs);
    this.prune(nowMs);
  }

  /** Whether the action's chunks are to be withheld. */
  stopped(actionId: string, nowMs: number): boolean {
    const until = this.stops.get(actionId);
    return until !== undefined && until > nowMs;
  }

  /** The action's stream ended here: its stop, if any, is no longer needed. */
  forget(actionId: string): void {
    this.stops.delete(actionId);
  }

  get size(): number {
    return this.stops.size;
  }

  private prune(nowMs: number): void {
    for (const [id, until] of this.stops) {
      if (until > nowMs && this.stops.size <= this.max) break;
      this.stops.delete(id);
    }
  }
}
