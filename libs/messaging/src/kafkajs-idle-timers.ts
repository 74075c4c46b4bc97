/**
 * Two timers kafkajs 2.2.4 (the latest release) runs on every broker connection, idle or not,
 * made to cost what they are worth (issue 12, docs/decisions.md "Idle cost").
 *
 * 1. It re-arms a timer on every broker connection after each check
 * of its pending-request queue, and with no throttle and nothing pending that timer is
 * `setTimeout(check, <negative>)`, i.e. 1 ms: an idle process wakes ~1,000 times a second per
 * connection (tulios/kafkajs#1556, #1704; unfixed upstream). Measured on an idle stack: every
 * service at ~0.06 cores, most of it in this loop. The patch skips the re-arm exactly when there
 * is nothing it could do: no request pending and no throttle in force. A request that cannot go
 * out at once is pushed to `pending` and schedules a check itself, and every answered request
 * checks the queue again, so nothing waits on the loop.
 * 2. Request timeouts are checked every min(requestTimeout, 100 ms) by an interval per
 * connection: 10 wake-ups a second each. Checked every second instead (the same check), a 10 s
 * request timeout fires within 11 s.
 *
 * Applied once, to the class every connection uses; a kafkajs without these methods is left alone.
 */
interface InflightRequest {
  sentAt: number;
  requestTimeout: number;
  timeoutRequest(): void;
}

interface RequestQueueInternals {
  pending: unknown[];
  inflight: Map<number, InflightRequest>;
  throttledUntil: number;
  enforceRequestTimeout: boolean;
  requestTimeout: number;
  requestTimeoutIntervalId?: NodeJS.Timeout;
  isConnected(): boolean;
  destroy(): void;
  scheduleCheckPendingRequests(): void;
  scheduleRequestTimeoutCheck(): void;
}

/** How often in-flight requests are checked against their timeout. */
export const REQUEST_TIMEOUT_CHECK_MS = 1000;

const PATCHED = Symbol.for('gateway.kafkajs.idleTimersPatched');

export function quietKafkajsIdleTimers(): boolean {
  const RequestQueue = require('kafkajs/src/network/requestQueue') as { prototype: RequestQueueInternals & { [PATCHED]?: true } };
  const proto = RequestQueue.prototype;
  if (proto[PATCHED]) return true;
  const original = proto.scheduleCheckPendingRequests;
  if (typeof original !== 'function' || typeof proto.scheduleRequestTimeoutCheck !== 'function') return false;
  proto.scheduleCheckPendingRequests = function (this: RequestQueueInternals) {
    if (this.pending.length === 0 && this.throttledUntil <= Date.now()) return;
    original.call(this);
  };
  // kafkajs's own body, with the interval as the only change.
  proto.scheduleRequestTimeoutCheck = function (this: RequestQueueInternals) {
    if (!this.enforceRequestTimeout) return;
    this.destroy();
    this.requestTimeoutIntervalId = setInterval(
      () => {
        this.inflight.forEach((request) => {
          if (Date.now() - request.sentAt > request.requestTimeout) request.timeoutRequest();
        });
        if (!this.isConnected()) this.destroy();
      },
      Math.min(this.requestTimeout, REQUEST_TIMEOUT_CHECK_MS),
    );
  };
  proto[PATCHED] = true;
  return true;
}
