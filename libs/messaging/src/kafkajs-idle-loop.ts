/**
 * kafkajs 2.2.4 (the latest release) re-arms a timer on every broker connection after each check
 * of its pending-request queue, and with no throttle and nothing pending that timer is
 * `setTimeout(check, <negative>)`, i.e. 1 ms: an idle process wakes ~1,000 times a second per
 * connection (tulios/kafkajs#1556, #1704; unfixed upstream). Measured on an idle stack: every
 * service at ~0.06 cores, almost all of it in this loop (issue 12, docs/decisions.md "Idle cost").
 *
 * The patch skips the re-arm exactly when there is nothing it could do: no request pending and no
 * throttle in force. A request that cannot go out at once is pushed to `pending` and schedules a
 * check itself, and every answered request checks the queue again, so nothing waits on the loop.
 * Applied once, to the class every connection uses; a kafkajs without that method is left alone.
 */
interface RequestQueueInternals {
  pending: unknown[];
  throttledUntil: number;
  scheduleCheckPendingRequests(): void;
}

const PATCHED = Symbol.for('gateway.kafkajs.idleLoopPatched');

export function stopKafkajsIdleLoop(): boolean {
  const RequestQueue = require('kafkajs/src/network/requestQueue') as { prototype: RequestQueueInternals & { [PATCHED]?: true } };
  const proto = RequestQueue.prototype;
  if (proto[PATCHED]) return true;
  const original = proto.scheduleCheckPendingRequests;
  if (typeof original !== 'function') return false;
  proto.scheduleCheckPendingRequests = function (this: RequestQueueInternals) {
    if (this.pending.length === 0 && this.throttledUntil <= Date.now()) return;
    original.call(this);
  };
  proto[PATCHED] = true;
  return true;
}
