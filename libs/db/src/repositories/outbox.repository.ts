import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { PolicyChangedV1, TopicKey, TopicPayload, Topics, UsageSettledV1 } from '@gateway/contracts';
import type { BatchOutcome, OutboxRow, OutboxStore, QuarantineReason } from '@gateway/messaging';
import { Database, PreparedStatement, Tx, prismaTx, txQuery } from '../database';
import { FlushDropReason, parseLsn, WalFlushGate, WalPosition } from '../wal-flush-gate';
import { usageSettledOfLedger } from './ledger.repository';

/** How long a row belongs to the relay of the process that wrote it before any sweep may take it. */
export const OUTBOX_LEASE_MS = 30_000;

/**
 * Runs after every publish of the hot paths, so it is prepared once per connection. A published
 * row is deleted, not marked (migration 20261204000000): the topic is the record.
 */
const DELETE_PUBLISHED: PreparedStatement = {
  name: 'outbox_delete_published',
  text: 'DELETE FROM outbox_message WHERE id = ANY($1::bigint[])',
};

/** Where the WAL stands, for rows committed without waiting for the flush (`committedBeforeFlush`). */
const WAL_POSITION: PreparedStatement = {
  name: 'outbox_wal_position',
  text: 'SELECT pg_current_wal_insert_lsn()::text AS insert_lsn, pg_current_wal_flush_lsn()::text AS flush_lsn, pg_postmaster_start_time()::text AS started',
};

/**
 * A batch of one topic's events, in order (ids ascending as the events come), as three texts of one
 * line per event: the event ids and keys as JSON strings, the payloads as their JSON text. No JSON
 * text has a raw newline (JSON.stringify escapes every control character in a string), so
 * `string_to_table` splits them in C; each payload is only checked as `json`, never parsed into a
 * tree. 1,000 settled events: ~32 ms of backend CPU against ~70 ms for one `jsonb` document read
 * with `jsonb_to_recordset` into a `jsonb` column, and ~48 ms with `json_to_recordset` (arrays as
 * `text[]` cost `pg` ~30 ms escaping them) (docs/decisions.md, "Outbox payloads as json text").
 */
const INSERT_OUTBOX_ROWS = `
  INSERT INTO outbox_message (event_id, topic, key, payload)
  SELECT e.event_id::json #>> '{}', $1::text, e.key::json #>> '{}', e.payload::json
  FROM ROWS FROM (string_to_table($2::text, E'\\n'), string_to_table($3::text, E'\\n'), string_to_table($4::text, E'\\n'))
    WITH ORDINALITY AS e(event_id, key, payload, n)
  ORDER BY e.n
  RETURNING id, event_id`;

/**
 * A settled batch's one row (`appendLedgerSettled`): the payload names its ledger rows, [[attempt
 * id, event id], ...], ~80 bytes an event against ~1 KB for the event itself.
 */
const INSERT_LEDGER_SETTLED = `
  INSERT INTO outbox_message (event_id, topic, key, payload, kind) VALUES ($1, $2, '', $3::json, 'ledger_settled') RETURNING id`;

/** What a row holds: the message itself, or a settled batch whose events are built from its ledger rows. */
type OutboxKind = 'message' | 'ledger_settled';
type StoredRow = { id: bigint; topic: string; key: string; payload: unknown; kind: OutboxKind };

/**
 * A `ledger_settled` row's payload as `appendLedgerSettled` writes it: at least one [attempt id,
 * event id] pair, on the settled topic, each id a string Postgres `text` can hold (no NUL: the
 * sweep's lookup would fail on it, and with it every sweep). Anything else (a row written by hand,
 * a future writer) is quarantined as `schema_invalid`, never left to fail every sweep.
 */
const storedId = z
  .string()
  .min(1)
  .refine((s) => !s.includes('\u0000'));
const ledgerRefs = z.array(z.tuple([storedId, storedId])).min(1);

/**
 * Whether the sweep has anything to claim; runs every second in every service. Two probes, each
 * one index lookup: the oldest unquarantined row past the lease (`outbox_message_created_at_idx`),
 * and this relay's failed sends by id.
 */
const SWEEP_DUE: PreparedStatement = {
  name: 'outbox_sweep_due',
  text: `SELECT EXISTS (
      SELECT 1 FROM outbox_message WHERE quarantined_at IS NULL AND created_at < now() - make_interval(secs => $1::double precision)
    ) OR EXISTS (
      SELECT 1 FROM outbox_message WHERE quarantined_at IS NULL AND id = ANY($2::bigint[])
    ) AS due`,
};

/**
 * Transactional outbox: events are written with the state change they announce. A row is one
 * message, or (kind `ledger_settled`) a settled batch's `usage.settled` events, which a sweep
 * builds from the ledger rows the row names: the ledger row is the event's record, so its ~1 KB is
 * not written a second time (migration 20261205000000). After the commit, the messages that
 * transaction wrote are handed to listeners, each under the id of its row (the relay publishes
 * them at once, and deletes a row when all its messages are out); rows nobody published are
 * found by the sweep (`drainBatch`) once they are older than `sweepAfterMs`, the lease of the
 * writer's relay. A row the broker has acknowledged is deleted
 * (`deletePublished`, or in the sweep's transaction): what the table holds is what still waits,
 * and the quarantined rows an operator must fix.
 *
 * The lease is 30 s: every service's relay sweeps the one table, and a row is still there until
 * its writer's relay has sent it and its batched delete has committed; on a saturated machine
 * (produce requests queued behind each other, deletes waiting for a pool connection) that took
 * longer than the 3 s it was, and other relays' sweeps sent the rows again. (The duplicates of
 * issue 15 had a worse cause, a relay that stopped marking sent rows for good: `OutboxRelay.flushDeletes`.)
 * A failed direct send does not wait for the lease: its relay names the rows (`retryIds`) and
 * sweeps them at once. Only a relay that dies between its send and its delete leaves rows for the
 * lease to expire (at-least-once: then they are sent again).
 */
export class OutboxRepository implements OutboxStore {
  private readonly listeners: Array<(rows: OutboxRow[]) => void> = [];
  private readonly dropListeners: Array<(rows: OutboxRow[], reason: FlushDropReason, detail?: string) => void> = [];
  private readonly pendingByTx = new WeakMap<Tx, OutboxRow[]>();
  private flushGate?: WalFlushGate<OutboxRow>;

  constructor(
    private readonly db: Database,
    private readonly sweepAfterMs = OUTBOX_LEASE_MS,
  ) {}

  /** Called after every commit that appended outbox rows, with those rows. */
  onCommittedAppend(listener: (rows: OutboxRow[]) => void): void {
    this.listeners.push(listener);
  }

  /**
   * Called with rows `committedBeforeFlush` gave up on (the flush gate stopped, the server
   * restarted after their commit, or the WAL position could not be read): they were not handed to
   * the relay, and the sweep publishes whatever of them the table still holds after the lease.
   */
  onFlushDropped(listener: (rows: OutboxRow[], reason: FlushDropReason, detail?: string) => void): void {
    this.dropListeners.push(listener);
  }

  async append<K extends TopicKey>(tx: Tx, topicKey: K, key: string, payload: TopicPayload<K>): Promise<void> {
    await this.appendMany(tx, topicKey, [{ key, payload }]);
  }

  /** The one writer of `policy.changed`: an operator-side change, announced with the write that made it. */
  async policyChanged(
    tx: Tx,
    c: { entity: PolicyChangedV1['entity']; entityId: string; change: string; actor: string; now: Date },
  ): Promise<void> {
    await this.append(tx, 'policyChanged', c.entityId, {
      event_id: randomUUID(),
      timestamp: c.now.toISOString(),
      entity: c.entity,
      entity_id: c.entityId,
      change: c.change,
      actor: c.actor,
    });
  }

  /** Appends events of one topic in one statement (a settlement batch's `usage.settled`). */
  async appendMany<K extends TopicKey>(
    tx: Tx,
    topicKey: K,
    events: ReadonlyArray<{ key: string; payload: TopicPayload<K> }>,
  ): Promise<void> {
    if (events.length === 0) return;
    const spec = Topics[topicKey];
    const values = this.encode(topicKey, events);
    // Three texts of one line per event, sent by `pg` on the transaction's connection (`txQuery`),
    // not arrays whose elements `pg` escapes one by one. Each payload is stringified once: the
    // lines are those texts, and the relay publishes the same text (`OutboxRow.json`).
    const lines = (f: (v: (typeof values)[number]) => string) => values.map(f).join('\n');
    const rows = await txQuery<{ id: bigint | string; event_id: string }>(tx, INSERT_OUTBOX_ROWS, [
      spec.name,
      lines((v) => JSON.stringify(v.eventId)),
      lines((v) => JSON.stringify(v.key)),
      lines((v) => v.json),
    ]);
    const idOf = new Map(rows.map((r) => [r.event_id, BigInt(r.id)]));
    for (const v of values) {
      this.committed(tx, { id: idOf.get(v.eventId) as bigint, topic: spec.name, key: v.key, payload: v.value, json: v.json });
    }
  }

  /**
   * A settled batch's `usage.settled` events, announced by one row of kind `ledger_settled` naming
   * the ledger rows this transaction inserted ([attempt id, event id]); a sweep builds the events
   * from those rows (`usageSettledOfLedger`, the same function of the row as `recordMany` used).
   * This process's relay publishes the events as built here, each under the row's id.
   */
  async appendLedgerSettled(tx: Tx, events: ReadonlyArray<{ key: string; payload: UsageSettledV1 }>): Promise<void> {
    if (events.length === 0) return;
    const topic = Topics.usageSettled.name;
    const values = this.encode('usageSettled', events);
    const [row] = await txQuery<{ id: bigint | string }>(tx, INSERT_LEDGER_SETTLED, [
      randomUUID(),
      topic,
      JSON.stringify(values.map((v) => [v.value.attempt_id, v.eventId])),
    ]);
    const id = BigInt(row.id);
    for (const v of values) this.committed(tx, { id, topic, key: v.key, payload: v.value, json: v.json });
  }

  /** Each event checked against its topic's schema and stringified once (the relay publishes that text). */
  private encode<K extends TopicKey>(topicKey: K, events: ReadonlyArray<{ key: string; payload: TopicPayload<K> }>) {
    const schema = Topics[topicKey].schema;
    return events.map((e) => {
      const value = schema.parse(e.payload) as TopicPayload<K> & { event_id?: string };
      return { eventId: value.event_id ?? randomUUID(), key: e.key, value, json: JSON.stringify(value) };
    });
  }

  /**
   * Hands rows that an autocommit statement has already committed (a hot path's single statement,
   * no interactive transaction) to the listeners at once.
   */
  committedNow(rows: OutboxRow[]): void {
    if (rows.length === 0) return;
    for (const l of this.listeners) l(rows);
  }

  /**
   * Hands rows that an autocommit statement committed with `synchronous_commit = off` to the
   * listeners once the server's WAL flush has passed that commit (`WalFlushGate`, a look every
   * 100 ms while rows wait): until then a crash of the server could still undo them, and nothing
   * may go out on their word. `serverStartedAt` is `pg_postmaster_start_time()` as the committing
   * statement read it. Rows the gate drops (a restart, an unreadable position, a stop) go to the
   * `onFlushDropped` listeners; what of them survived stays in the table for the sweep, after the
   * lease (a crash may have undone the rest: apps/admission/test/admission-crash.int-spec.ts).
   */
  committedBeforeFlush(rows: OutboxRow[], serverStartedAt: string): void {
    if (rows.length === 0) return;
    this.flushGate ??= new WalFlushGate<OutboxRow>(
      () => this.walPosition(),
      (released) => this.committedNow(released),
      (dropped, reason, detail) => {
        for (const l of this.dropListeners) l(dropped, reason, detail);
      },
      100,
    );
    this.flushGate.add(rows, serverStartedAt);
  }

  /** Stops holding rows for the flush (what still waits is left to the sweep). */
  async stop(): Promise<void> {
    await this.flushGate?.stop();
  }

  private async walPosition(): Promise<WalPosition> {
    const [r] = await this.db.query<{ insert_lsn: string; flush_lsn: string; started: string }>(WAL_POSITION, []);
    return { insertLsn: parseLsn(r.insert_lsn), flushLsn: parseLsn(r.flush_lsn), serverStartedAt: r.started };
  }

  /** Registers a row written by another statement of `tx`, to be handed to listeners after commit. */
  committed(tx: Tx, row: OutboxRow): void {
    let committed = this.pendingByTx.get(tx);
    if (!committed) {
      const list: OutboxRow[] = [];
      committed = list;
      this.pendingByTx.set(tx, list);
      this.db.afterCommit(tx, () => {
        for (const l of this.listeners) l(list);
      });
    }
    committed.push(row);
  }

  async deletePublished(ids: bigint[]): Promise<void> {
    if (ids.length === 0) return;
    await this.db.query(DELETE_PUBLISHED, [ids.map(String)]);
  }

  /**
   * The sweep: rows older than `sweepAfterMs`, still unpublished and not quarantined, claimed
   * with SKIP LOCKED, their messages handed to `publish` (a `ledger_settled` row's built from its
   * ledger rows; rows are taken in order until they hold `limit` messages, at least one row, and
   * the rest of the claim is left for the next batch). What `publish` sent is deleted and what it
   * refused for good is quarantined with its reason, in the same transaction, even when a transient
   * error stopped it; so is a `ledger_settled` row that can never be built (`messagesOf`). Nearly every sweep finds nothing: one autocommit statement says so, and
   * only a sweep with something to claim opens the transaction.
   */
  async drainBatch(
    limit: number,
    publish: (rows: OutboxRow[]) => Promise<BatchOutcome>,
    retryIds: readonly bigint[] = [],
  ): Promise<{ claimed: number; more: boolean } & BatchOutcome> {
    const retry = retryIds.map(String);
    const [{ due }] = await this.db.query<{ due: boolean }>(SWEEP_DUE, [this.sweepAfterMs / 1000, retry]);
    if (!due) return { claimed: 0, more: false, published: [], quarantined: [] };
    return this.db.transaction(async (tx) => {
      const claimed = await prismaTx(tx).$queryRaw<StoredRow[]>`
        SELECT id, topic, key, payload, kind FROM outbox_message
        WHERE quarantined_at IS NULL
          AND (created_at < now() - make_interval(secs => ${this.sweepAfterMs / 1000}) OR id = ANY(${retry}::bigint[]))
        ORDER BY id LIMIT ${limit} FOR UPDATE SKIP LOCKED`;
      if (claimed.length === 0) return { claimed: 0, more: false, published: [], quarantined: [] };
      const { messages, refused, taken } = await this.messagesOf(tx, claimed, limit);
      const outcome = messages.length > 0 ? await publish(messages) : { published: [], quarantined: [] };
      outcome.quarantined.push(...refused);
      if (outcome.published.length > 0) {
        await prismaTx(tx).$executeRaw`DELETE FROM outbox_message WHERE id = ANY(${outcome.published}::bigint[])`;
      }
      if (outcome.quarantined.length > 0) {
        await prismaTx(tx).$executeRaw`
          UPDATE outbox_message o SET quarantined_at = now(), quarantine_reason = q.reason
          FROM unnest(${outcome.quarantined.map((q) => q.id)}::bigint[], ${outcome.quarantined.map((q) => q.reason)}::text[]) AS q(id, reason)
          WHERE o.id = q.id`;
      }
      return { claimed: claimed.length, more: claimed.length === limit || taken < claimed.length, ...outcome };
    });
  }

  /**
   * The messages of stored rows, in order, until they number `limit` (at least one row): a
   * `message` row is its payload; a `ledger_settled` row is one `usage.settled` event per ledger row
   * it names, each under the row's id. `refused`: `ledger_settled` rows that can never be built — a
   * payload that is not a list of pairs on the settled topic (`schema_invalid`), or a ledger row it
   * names that is gone (`source_missing`).
   */
  private async messagesOf(
    tx: Tx,
    stored: StoredRow[],
    limit: number,
  ): Promise<{ messages: OutboxRow[]; refused: BatchOutcome['quarantined']; taken: number }> {
    const rows: Array<StoredRow & { refs?: Array<[string, string]> }> = [];
    for (let count = 0; rows.length < stored.length && (rows.length === 0 || count < limit);) {
      const row = stored[rows.length];
      const refs = row.kind === 'ledger_settled' && row.topic === Topics.usageSettled.name ? ledgerRefs.safeParse(row.payload) : null;
      rows.push({ ...row, refs: refs?.success ? refs.data : undefined });
      count += refs?.success ? refs.data.length : 1;
    }
    const pairs = rows.flatMap((r) => r.refs ?? []);
    const settled = pairs.length > 0 ? await usageSettledOfLedger(tx, pairs) : new Map<string, { key: string; payload: UsageSettledV1 }>();
    const messages: OutboxRow[] = [];
    const refused: BatchOutcome['quarantined'] = [];
    const refuse = (r: StoredRow, reason: QuarantineReason) => refused.push({ id: r.id, topic: r.topic, reason });
    for (const r of rows) {
      if (r.kind !== 'ledger_settled') {
        messages.push({ id: r.id, topic: r.topic, key: r.key, payload: r.payload });
        continue;
      }
      if (!r.refs) {
        refuse(r, 'schema_invalid');
        continue;
      }
      const events = r.refs.map(([attemptId]) => settled.get(attemptId));
      if (events.some((e) => e === undefined)) refuse(r, 'source_missing');
      else for (const e of events as Array<{ key: string; payload: UsageSettledV1 }>) messages.push({ id: r.id, topic: r.topic, ...e });
    }
    return { messages, refused, taken: rows.length };
  }

  /**
   * The messages still waiting on a topic, as a sweep would publish them (quarantined rows left
   * out): for tests and for whoever investigates a backlog.
   */
  async waitingMessages(topicKey: TopicKey): Promise<OutboxRow[]> {
    return this.db.transaction(async (tx) => {
      const stored = await prismaTx(tx).$queryRaw<StoredRow[]>`
        SELECT id, topic, key, payload, kind FROM outbox_message
        WHERE quarantined_at IS NULL AND topic = ${Topics[topicKey].name} ORDER BY id`;
      return (await this.messagesOf(tx, stored, Infinity)).messages;
    });
  }

  /** Rows still waiting to be published (quarantined rows are not waiting). */
  async unpublishedCount(): Promise<number> {
    return this.db.prisma.outboxMessage.count({ where: { quarantinedAt: null } });
  }
}
