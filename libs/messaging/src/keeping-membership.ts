/**
 * Runs a handler while telling the group coordinator every second that this member lives. A
 * handler that outlasts the session timeout (6 s: a batch transaction on a busy box, a statement
 * waiting out the database's answer bound on a dead connection) was otherwise taken for a dead
 * member: the group rebalanced, every member's partitions paused, and the uncommitted message came
 * again, to be held as long again, so a consumer could go round that loop for the whole outage
 * (apps/dispatch/test/consumer-membership.int-spec.ts). kafkajs sends at most one heartbeat per
 * `heartbeatInterval` (2 s), whatever the calls. After a failed one it stops: the group is then
 * rebalancing or has dropped the member, which rejoins only once the handler returns, and kafkajs
 * logs each failed heartbeat as an error.
 */
export async function keepingMembership<T>(heartbeat: () => Promise<void>, handle: () => Promise<T>): Promise<T> {
  const beat: NodeJS.Timeout = setInterval(() => void heartbeat().catch(() => clearInterval(beat)), 1_000);
  try {
    return await handle();
  } finally {
    clearInterval(beat);
  }
}
