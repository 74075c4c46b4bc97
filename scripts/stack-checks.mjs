// Checks and helpers shared by the scripts that run a whole stack of their own and then prove
// invariants over it (scripts/chaos.mjs, scripts/simulate-day.mjs): a seeded random sequence, the
// budget accounts' sum rule, quiescence, the ledger's digest, the settled topic's totals, lag.
import path from 'node:path';
import { ROOT, sleep, tsRequire } from './services.mjs';

const require = tsRequire();
const { Topics } = require('@gateway/contracts');
const { Kafka, logLevel } = require('kafkajs');

/** Deterministic pseudo-random numbers (the provider simulator's mulberry32), so a seed reproduces the same load mix. */
export const rng = require(path.join(ROOT, 'apps/provider-sim/src/text.ts')).createRng;

/** Budget accounts where pending + unresolved + settled > budget, or any part is negative. */
export async function overBudgetAccounts(db) {
  const { rows } = await db.query(
    `SELECT id, budget_microusd::text AS b, pending_microusd::text AS p, unresolved_microusd::text AS u, settled_microusd::text AS s
     FROM budget_account
     WHERE pending_microusd + unresolved_microusd + settled_microusd > budget_microusd
        OR pending_microusd < 0 OR unresolved_microusd < 0 OR settled_microusd < 0`,
  );
  return rows.map((r) => `account ${r.id} pending ${r.p} + unresolved ${r.u} + settled ${r.s} vs budget ${r.b}`);
}

/** Waits until no attempt is in flight or awaiting settlement, no action is open and the outbox is empty; false at the limit. */
export async function quiesce(db, limitMs) {
  const until = Date.now() + limitMs;
  while (Date.now() < until) {
    const { rows } = await db.query(`SELECT
      (SELECT count(*) FROM attempt WHERE status IN ('claimed', 'in_flight', 'succeeded', 'failed', 'cancelled', 'usage_missing'))::int AS a,
      (SELECT count(*) FROM action WHERE status IN ('received', 'admitted', 'dispatched'))::int AS b,
      (SELECT count(*) FROM outbox_message WHERE quarantined_at IS NULL)::int AS c,
      (SELECT count(*) FROM reconciliation_case WHERE status = 'open' AND late_evidence IS NOT NULL)::int AS d`);
    if (rows[0].a === 0 && rows[0].b === 0 && rows[0].c === 0 && rows[0].d === 0) return true;
    await sleep(500);
  }
  return false;
}

/** Rows, sum and a digest of the whole ledger (what a replay or a second import must not change). */
export async function ledgerSnapshot(db) {
  const { rows } = await db.query(`SELECT count(*)::int AS rows, COALESCE(sum(cost_microusd), 0)::text AS sum,
    md5(COALESCE(string_agg(attempt_id || ':' || cost_microusd || ':' || usage_source, ',' ORDER BY attempt_id), '')) AS digest
    FROM ledger_entry`);
  return { rows: rows[0].rows, sum: rows[0].sum, digest: rows[0].digest };
}

/** Consumer lag of a group on a topic reaches 0 within 60 s (false otherwise). */
export async function waitForLag(brokers, groupId, topic) {
  const admin = new Kafka({ clientId: 'stack-checks', brokers: [brokers], logLevel: logLevel.NOTHING }).admin();
  await admin.connect();
  try {
    const until = Date.now() + 60_000;
    while (Date.now() < until) {
      const ends = await admin.fetchTopicOffsets(topic);
      const [committed] = await admin.fetchOffsets({ groupId, topics: [topic] });
      const lag = ends.reduce((sum, e) => {
        const c = committed.partitions.find((p) => p.partition === e.partition);
        const at = c && Number(c.offset) >= 0 ? Number(c.offset) : 0;
        return sum + (Number(e.high) - at);
      }, 0);
      if (lag === 0) return true;
      await sleep(500);
    }
    return false;
  } finally {
    await admin.disconnect();
  }
}

/**
 * Reads a topic from the beginning to the end it had when called, handing each event (parsed JSON)
 * to `onEvent`; how many messages it delivered.
 */
async function readTopic(brokers, topic, onEvent) {
  const kafka = new Kafka({ clientId: 'stack-checks-finance', brokers: [brokers], logLevel: logLevel.NOTHING });
  const admin = kafka.admin();
  await admin.connect();
  const ends = await admin.fetchTopicOffsets(topic);
  await admin.disconnect();
  const target = new Map(ends.map((e) => [e.partition, Number(e.high)]));
  if ([...target.values()].every((h) => h === 0)) return 0;
  let deliveries = 0;
  const consumer = kafka.consumer({ groupId: `stack-checks-finance-${Date.now()}` });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const seen = new Map();
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${topic} not read within 60 s`)), 60_000);
    consumer
      .run({
        eachMessage: async ({ partition, message }) => {
          deliveries += 1;
          onEvent(JSON.parse(message.value.toString('utf8')));
          seen.set(partition, Number(message.offset) + 1);
          if ([...target.entries()].every(([p, h]) => h === 0 || (seen.get(p) ?? 0) >= h)) {
            clearTimeout(timer);
            resolve();
          }
        },
      })
      .catch(reject);
  });
  await consumer.disconnect();
  return deliveries;
}

/** Reads the whole settled topic; finance counts each attempt once. */
export async function settledTopicSum(brokers) {
  const byAttempt = new Map();
  const events = new Set();
  const deliveries = await readTopic(brokers, Topics.usageSettled.name, (e) => {
    byAttempt.set(e.attempt_id, BigInt(e.cost_microusd));
    events.add(e.event_id);
  });
  const sum = [...byAttempt.values()].reduce((a, b) => a + b, 0n);
  // a duplicate delivery is an event id seen again (the outbox's at-least-once); `events` above
  // `attempts` would mean two different events for one attempt
  return { attempts: byAttempt.size, sum: sum.toString(), duplicates: deliveries - events.size, events: events.size };
}

/** What consumers parked on the dead-letter topic, as `group reason_class: n` lines (empty: nothing). */
export async function parkedMessages(brokers) {
  const counts = new Map();
  await readTopic(brokers, Topics.deadLetters.name, (e) => {
    const k = `${e.consumer_group} ${e.reason_class} (${e.topic})`;
    counts.set(k, (counts.get(k) ?? 0) + 1);
  });
  return [...counts.entries()].map(([k, n]) => `${k}: ${n}`);
}

/**
 * The admission decisions on the public topic that admitted an action (`policy_result` allow) and
 * name an action Postgres does not have: an admission a Postgres crash undid must never have been
 * announced (docs/decisions.md, "The admission's commit does not wait for the disk").
 */
export async function announcedAdmissionsWithoutAction(db, brokers) {
  const admitted = new Set();
  await readTopic(brokers, Topics.admissionDecisions.name, (e) => {
    if (e.policy_result === 'allow' && e.action_id) admitted.add(e.action_id);
  });
  const { rows } = await db.query(
    `SELECT id FROM unnest($1::text[]) AS announced(id) WHERE NOT EXISTS (SELECT 1 FROM action a WHERE a.id = announced.id)`,
    [[...admitted]],
  );
  return { announced: admitted.size, missing: rows.map((r) => r.id) };
}

/** Every service of a `startServices` stack answers /health within 60 s; the names of those that do not. */
export async function unhealthyServices(services, env) {
  const until = Date.now() + 60_000;
  const down = [];
  for (const c of services.children) {
    // an instance of a scaled service listens on its own port (instancesOf)
    const port = c.port ?? Number(env[c.service.portEnv]);
    for (;;) {
      const ok = await fetch(`http://127.0.0.1:${port}/health`, { signal: AbortSignal.timeout(2000) })
        .then((r) => r.ok)
        .catch(() => false);
      if (ok) break;
      if (Date.now() > until) {
        down.push(c.name ?? c.service.name);
        break;
      }
      await sleep(500);
    }
  }
  return down;
}

/**
 * Outbox messages each service's sweep published (`gateway_outbox_swept_total`, from /metrics), summed
 * by topic over a `startServices` stack. A process that restarted counts since its restart.
 */
export async function sweptOutboxRows(services, env) {
  const byTopic = {};
  for (const c of services.children) {
    // an instance of a scaled service listens on its own port (instancesOf)
    const port = c.port ?? Number(env[c.service.portEnv]);
    const text = await fetch(`http://127.0.0.1:${port}/metrics`, { signal: AbortSignal.timeout(5000) })
      .then((r) => (r.ok ? r.text() : ''))
      .catch(() => '');
    for (const m of text.matchAll(/^gateway_outbox_swept_total\{[^}]*topic="([^"]+)"[^}]*\} (\d+)/gm))
      byTopic[m[1]] = (byTopic[m[1]] ?? 0) + Number(m[2]);
  }
  return byTopic;
}
