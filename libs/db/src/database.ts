import { PrismaPg } from '@prisma/adapter-pg';
import pg from 'pg';
import { Prisma, PrismaClient } from './generated/prisma/client';

declare const txBrand: unique symbol;

/**
 * An open transaction; repositories accept it so a use case can commit several writes at once.
 * Opaque outside libs/db: use cases pass it along and never see Prisma (repositories unwrap it
 * with `prismaTx`).
 */
export type Tx = { readonly [txBrand]: 'Tx' };

/** The Prisma client behind a `Tx`; for repositories in libs/db only (not exported from the lib). */
export type PrismaTx = Prisma.TransactionClient;
export function prismaTx(tx: Tx): PrismaTx {
  return tx as unknown as PrismaTx;
}

/** The database whose transaction `tx` is (set while it is open, by `Database.transaction`). */
const databaseOf = new WeakMap<Tx, Database>();
/** The pool connection an open transaction runs on, once `txQuery` has looked it up. */
const connectionOf = new WeakMap<Tx, pg.PoolClient>();
/**
 * Transactions whose time ran out (`Database.transaction`'s own timer, which fires before
 * Prisma's): `txQuery` sends them nothing more. Prisma rolls a timed-out transaction back by
 * queueing ROLLBACK on its connection; a statement `txQuery` queued after that ran in autocommit
 * and committed on its own (docs/decisions.md, "A Postgres that stops answering").
 */
const expired = new WeakSet<Tx>();
/** How much earlier than Prisma's a transaction's own timer fires. */
const EXPIRY_LEAD_MS = 1000;
/** `Database.transaction`'s time when the caller gives none. */
const TRANSACTION_TIMEOUT_DEFAULT_MS = 10_000;
/** The longest a transaction of the services lives: its time, then Prisma's rollback a second later. */
export const LONGEST_TRANSACTION_MS = TRANSACTION_TIMEOUT_DEFAULT_MS + EXPIRY_LEAD_MS;
/** The server's bound on a session idle inside a transaction when unset (`idleInTransactionMs`). */
export const IDLE_IN_TRANSACTION_DEFAULT_MS = LONGEST_TRANSACTION_MS + 4_000;

/**
 * One statement (positional `$n` parameters) inside the transaction `tx`, sent by `pg` itself on
 * the transaction's connection: no Prisma parameter handling, which serialises every parameter to
 * JSON and parses it back (the settlement batch's rows are one JSON text of ~0.5 MB). The
 * connection is found once per transaction by its backend pid (`SELECT pg_backend_pid()` through
 * Prisma, then the pool connection with that `processID`). For repositories in libs/db only. Rows
 * come as `pg` parses them (bigint and numeric columns as strings). Where the connection cannot be
 * found, Prisma's `$queryRawUnsafe` runs the statement, with the same result apart from those types.
 */
export async function txQuery<R extends Record<string, unknown>>(tx: Tx, text: string, values: unknown[]): Promise<R[]> {
  refuseExpired(tx);
  let connection = connectionOf.get(tx);
  const db = databaseOf.get(tx);
  if (!connection && db) {
    const [{ pid }] = await prismaTx(tx).$queryRaw<Array<{ pid: number }>>`SELECT pg_backend_pid() AS pid`;
    connection = db.connectionByBackend.get(pid);
    if (connection) connectionOf.set(tx, connection);
  }
  if (connection && db) {
    refuseExpired(tx); // the lookup may have outlasted the transaction's time; queueing the statement below is synchronous
    return (await connection.query<R>(text, values)).rows;
  }
  return prismaTx(tx).$queryRawUnsafe<R[]>(text, ...values);
}

function refuseExpired(tx: Tx): void {
  if (expired.has(tx)) throw new Error('Transaction already closed: its time ran out before this statement was sent');
}

/** `Database`'s `answerWithinMs` when unset (the services' DATABASE_ANSWER_TIMEOUT_MS default). */
export const STATEMENT_ANSWER_DEFAULT_MS = 30_000;

/**
 * A `pg` client whose statements must be answered within `ms`: past it the connection's socket is
 * destroyed, so the statement fails with "Connection terminated: no answer from the database
 * within … ms" (out of service: `isDatabaseOutOfService`), the pool drops the connection, and the
 * next statement gets a new one. Without it a connection that will never be answered (the flow
 * silently dropped between the two hosts, a server host gone without a reset) holds its statement,
 * everything queued behind it and its pool slot until the kernel gives up on the socket (~15
 * minutes), and Prisma puts a connection whose transaction timed out back into the pool as it is.
 * `pg`'s own `query_timeout` does neither: it fails the statement and leaves it in flight on the
 * connection. A server that is only slow or stopped for less than `ms` is waited for as before
 * (`ms` 0: without end). `seen.unanswered` is told each time (the pool then closes its idle
 * connections too), `seen.answer` each time the server answers a statement, with rows or with an
 * error of its own. Statements with their own reader (cursors) are not bounded; none run here.
 */
function boundedClient(ms: number, seen: { unanswered(): void; answer(): void }): typeof pg.Client {
  const query = pg.Client.prototype.query as (this: pg.Client, ...args: unknown[]) => unknown;
  const answered = () => seen.answer();
  const failed = (err: unknown) => {
    if (err instanceof pg.DatabaseError) seen.answer();
  };
  return class BoundedClient extends pg.Client {
    // every overload of pg's `query` (promise, callback); the arguments and result pass through
    override query(...args: unknown[]): any {
      if (typeof (args[0] as { submit?: unknown } | undefined)?.submit === 'function') return query.apply(this, args);
      const timer = ms > 0 ? setTimeout(() => this.giveUp(), ms) : undefined;
      const last = args.length - 1;
      const callback = args[last];
      if (typeof callback === 'function') {
        args[last] = (err: unknown, res: unknown) => {
          clearTimeout(timer);
          if (err) failed(err);
          else answered();
          (callback as (e: unknown, r: unknown) => void)(err, res);
        };
      }
      let pending: unknown;
      try {
        pending = query.apply(this, args);
      } catch (err) {
        // refused before it was sent (pg throws for a missing query): no answer is awaited, and a
        // timer left behind would close this (sound) connection later
        clearTimeout(timer);
        throw err;
      }
      if (typeof callback !== 'function') {
        if (typeof (pending as Promise<unknown> | undefined)?.then === 'function')
          (pending as Promise<unknown>).then(
            () => {
              clearTimeout(timer);
              answered();
            },
            (err: unknown) => {
              clearTimeout(timer);
              failed(err);
            },
          );
        else clearTimeout(timer);
      }
      return pending;
    }

    private giveUp(): void {
      destroyConnection(this, new Error(`Connection terminated: no answer from the database within ${ms} ms`));
      seen.unanswered();
    }
  };
}

/**
 * `url` with `-c name=value` added to its `options` (what the server sets for each session at
 * start-up), after any the URL already has; `value` 0 leaves `url` as it is.
 */
function withSessionSetting(url: string, name: string, value: number): string {
  if (value === 0) return url;
  const u = new URL(url);
  const options = [u.searchParams.get('options'), `-c ${name}=${value}`].filter(Boolean).join(' ');
  u.searchParams.set('options', options);
  return u.href;
}

/** Destroys a `pg` client's socket: its statements fail with `err`, and the pool drops it. */
function destroyConnection(client: pg.Client, err: Error): void {
  (client as unknown as { connection?: { stream?: { destroy(e?: Error): void } } }).connection?.stream?.destroy(err);
}

/**
 * A statement the hot paths run through plain `pg` (no ORM layer): `name` makes the server keep
 * it prepared per connection, so it is parsed and planned once per connection, not per call.
 */
export interface PreparedStatement {
  readonly name: string;
  readonly text: string;
}

/**
 * The Prisma client (Rust-free, through the `pg` driver adapter) and a transaction helper, over
 * one `pg` pool that the hot paths also use directly (`query`). Serialisation failures and
 * deadlocks are retried, since every write path here is idempotent within its transaction.
 */
export class Database {
  readonly prisma: PrismaClient;
  /** The one connection pool of this process: Prisma's adapter and `query` share it. */
  readonly pool: pg.Pool;
  private readonly answerWithinMs: number;
  private readonly idleInTransactionMs: number;
  /**
   * Statements the server answered (with rows or an error of its own) and connections it opened,
   * since start, on this pool: `outOfServiceIfUnanswered` compares it across a wait for a connection.
   */
  private answers = 0;

  constructor(
    readonly url: string,
    opts: {
      poolMax?: number;
      /**
       * How long a connection may sit idle before the pool closes it; 0 keeps it until it fails.
       * Unset: `pg`'s 10 s, for tools and tests that may forget to close. The services pass 0
       * (DATABASE_POOL_IDLE_MS): a closed connection is reopened at the next burst as a new
       * backend, which costs ~25 ms of CPU and prepares every statement again.
       */
      idleMs?: number;
      /**
       * How long one statement may go unanswered before its connection is taken for dead and
       * closed (`boundedClient`), and how long opening or waiting for a connection may take; 0
       * waits without end. Unset: `STATEMENT_ANSWER_DEFAULT_MS`.
       */
      answerWithinMs?: number;
      /**
       * How long the server lets one of this pool's sessions sit idle inside a transaction before
       * it ends the session and rolls the transaction back (Postgres
       * `idle_in_transaction_session_timeout`, sent with each connection's start-up). A
       * transaction here that lives ends by itself within its time (`transaction`'s `timeoutMs`,
       * which must stay below this), so a session idle longer belongs to a process that stopped
       * (SIGSTOP, a frozen VM) or whose flow was dropped: without the bound the server keeps its
       * row locks until its kernel gives up on the socket (hours with default keepalives), and
       * every writer of those rows (a workload's budget row) waits behind it. 0 sends nothing:
       * behind PgBouncer in transaction mode, which refuses start-up options, set it on the role.
       * Unset: `IDLE_IN_TRANSACTION_DEFAULT_MS`.
       */
      idleInTransactionMs?: number;
    } = {},
  ) {
    const answerWithinMs = opts.answerWithinMs ?? STATEMENT_ANSWER_DEFAULT_MS;
    this.answerWithinMs = answerWithinMs;
    this.idleInTransactionMs = opts.idleInTransactionMs ?? IDLE_IN_TRANSACTION_DEFAULT_MS;
    this.pool = new pg.Pool({
      connectionString: withSessionSetting(url, 'idle_in_transaction_session_timeout', this.idleInTransactionMs),
      max: opts.poolMax ?? 10,
      idleTimeoutMillis: opts.idleMs ?? 10_000,
      Client: boundedClient(answerWithinMs, {
        unanswered: () => this.closeIdleConnections(),
        answer: () => void this.answers++,
      }),
      // the same bound on opening a connection (and on waiting for one): a server that accepts the
      // connection and never answers its start-up would otherwise hold the caller without end
      connectionTimeoutMillis: answerWithinMs,
      // TCP keepalive on every connection, first probe after 30 s idle: a pool that keeps its
      // connections (idleMs 0) would otherwise let a firewall or NAT between it and the server
      // forget them in a quiet hour, and the next statement on one would wait for an answer that
      // cannot come (until `answerWithinMs` closes it).
      keepAlive: true,
      keepAliveInitialDelayMillis: 30_000,
    });
    // An idle client that loses its connection emits 'error' on the pool; it is dropped and replaced.
    this.pool.on('error', () => undefined);
    // The connections in the pool now (not checked out), for `closeIdleConnections`.
    this.pool.on('release', (err, client) => {
      // the pool keeps a released connection unless it failed or can no longer run statements
      if (!err && (client as pg.PoolClient & { _queryable?: boolean })._queryable !== false) this.idle.add(client);
    });
    this.pool.on('acquire', (client) => this.idle.delete(client));
    this.pool.on('remove', (client) => this.idle.delete(client));
    // The pool's connections by backend pid, so `txQuery` can find the one a transaction runs on.
    this.pool.on('connect', (client) => {
      this.answers++; // the server answered a connection's start-up
      // A connection that dies while checked out (a statement running on it, or a transaction
      // between statements) emits 'error' on its client, which pg's pool listens for only while
      // the connection is idle: without this listener a Postgres crash or restart killed the
      // process ("Unhandled 'error' event"). The statement running on it fails all the same, and
      // a released connection that failed is not reused (apps/admission/test/admission-crash.int-spec.ts).
      client.on('error', () => undefined);
      const pid = (client as pg.PoolClient & { processID: number | null }).processID;
      if (pid !== null) this.connectionByBackend.set(pid, client);
    });
    this.pool.on('remove', (client) => {
      const pid = (client as pg.PoolClient & { processID: number | null }).processID;
      if (pid !== null && this.connectionByBackend.get(pid) === client) this.connectionByBackend.delete(pid);
    });
    const adapter = new PrismaPg(this.pool, { disposeExternalPool: false });
    this.prisma = new PrismaClient({ adapter });
  }

  /**
   * One prepared statement in autocommit (its own transaction: locks are held for the statement
   * and its commit only, never across an event-loop turn). For the hot paths; everything else
   * goes through Prisma.
   */
  async query<R extends Record<string, unknown>>(
    statement: PreparedStatement,
    values: unknown[],
    opts: { maxWaitMs?: number } = {},
  ): Promise<R[]> {
    const config = { name: statement.name, text: statement.text, values };
    // A statement in autocommit that failed as a deadlock victim or serialisation failure rolled back whole.
    for (let attempt = 1; ; attempt++) {
      const answersBefore = this.answers;
      try {
        // not `pool.query`: it drops the connection after any error, and a refused write (a unique
        // key, a read-only server) would cost a new backend each time
        const client = await (opts.maxWaitMs === undefined ? this.pool.connect() : this.connectWithin(opts.maxWaitMs));
        let failure: Error | undefined;
        try {
          return (await client.query<R>(config)).rows;
        } catch (err) {
          // an error the server answered leaves the connection usable; anything else drops it
          if (!(err instanceof pg.DatabaseError)) failure = err as Error;
          throw err;
        } finally {
          client.release(failure);
        }
      } catch (err) {
        const cause = retryCause(err);
        if (attempt >= 3 || (cause !== 'deadlock' && cause !== 'serialization'))
          throw this.outOfServiceIfUnanswered(err, answersBefore, opts.maxWaitMs ?? this.answerWithinMs);
        this.retries[cause] += 1;
      }
    }
  }

  private readonly idle = new Set<pg.PoolClient>();

  /**
   * Closes every connection idle in the pool. Called when a statement went unanswered for the
   * bound (`boundedClient`): the connections idle beside the dead one reached the server the same
   * way and have waited as long, so where one flow was dropped the others likely were too, and
   * each would cost the next caller that draws it the whole bound again. Closing them costs a new
   * connection each, once.
   */
  private closeIdleConnections(): void {
    for (const client of this.idle)
      destroyConnection(client, new Error('Connection terminated: closed beside a connection the database did not answer'));
    this.idle.clear();
  }

  /**
   * `err`, or where it is a wait for a pool connection that timed out while the server answered
   * nothing on this pool (no statement, no new connection), the database out of service. In a
   * blackhole every slot is held by a statement or a connection's start-up that waits for
   * `answerWithinMs` (30 s), and a caller's wait (5 s for a transaction) runs out first, again and
   * again: as "busy" a consumer parked its message after six such retries, though no message could
   * succeed and the first failure at the bound would have said why. A pool whose every slot is
   * held by long statements for the whole wait reads the same; for a consumer the two differ in how
   * long it waits in place before parking (`classifyConsumerError`), not in what it does.
   */
  private outOfServiceIfUnanswered(err: unknown, answersBefore: number, waitedMs: number): unknown {
    if (this.answers !== answersBefore || !isPoolWaitTimeout(err)) return err;
    return new DatabaseOutOfServiceError(
      `database out of service: no connection within ${waitedMs} ms, and nothing this pool sent was answered meanwhile`,
      err,
    );
  }

  /** A pool connection, or pg's own "timeout exceeded when trying to connect" after `maxWaitMs`. */
  private connectWithin(maxWaitMs: number): Promise<pg.PoolClient> {
    return new Promise((resolve, reject) => {
      let timedOut = false;
      const timer = setTimeout(() => {
        timedOut = true;
        reject(new Error('timeout exceeded when trying to connect'));
      }, maxWaitMs);
      this.pool.connect().then(
        (client) => {
          if (timedOut) client.release();
          else {
            clearTimeout(timer);
            resolve(client);
          }
        },
        (err: unknown) => {
          clearTimeout(timer);
          reject(err);
        },
      );
    });
  }

  private readonly afterCommitHooks = new WeakMap<Tx, Array<() => void>>();
  /** This pool's open connections by their backend's pid (`txQuery`). */
  readonly connectionByBackend = new Map<number, pg.PoolClient>();

  /**
   * Transactions retried since start, by cause. A deadlock here means two write paths took row
   * locks in different orders (docs/architecture.md, "Lock order"); tests assert it stays 0.
   */
  readonly retries = { deadlock: 0, serialization: 0, connectionLost: 0 };

  /**
   * Runs `fn` in one transaction. `maxWaitMs` bounds the wait for a pool connection (default 5 s):
   * a caller with a deadline passes what is left of it, so an exhausted pool answers in time.
   * `timeoutMs` (default 10 s) is the transaction's time: past it `txQuery` refuses to send, and
   * Prisma rolls the transaction back a second later; it must end before the server's
   * idle-in-transaction bound (`idleInTransactionMs`) could.
   */
  async transaction<T>(fn: (tx: Tx) => Promise<T>, opts: { timeoutMs?: number; maxWaitMs?: number } = {}): Promise<T> {
    const timeoutMs = opts.timeoutMs ?? TRANSACTION_TIMEOUT_DEFAULT_MS;
    const maxWaitMs = opts.maxWaitMs ?? 5000;
    if (this.idleInTransactionMs > 0 && timeoutMs + EXPIRY_LEAD_MS >= this.idleInTransactionMs)
      throw new Error(
        `a transaction of ${timeoutMs} ms could outlive the server's idle-in-transaction bound (${this.idleInTransactionMs} ms)`,
      );
    for (let attempt = 1; ; attempt++) {
      const answersBefore = this.answers;
      let hooks: Array<() => void> = [];
      try {
        const result = await this.prisma.$transaction(
          async (client) => {
            const tx = client as unknown as Tx;
            hooks = [];
            this.afterCommitHooks.set(tx, hooks);
            databaseOf.set(tx, this);
            // Started after Prisma's own timer and set to fire EXPIRY_LEAD_MS before it: whatever
            // txQuery sent before this fires is queued ahead of Prisma's ROLLBACK, nothing after.
            const timer = setTimeout(() => expired.add(tx), timeoutMs);
            try {
              return await fn(tx);
            } finally {
              clearTimeout(timer);
              // the connection goes back to the pool with the commit: a late txQuery must not reach it
              databaseOf.delete(tx);
              connectionOf.delete(tx);
            }
          },
          { timeout: timeoutMs + EXPIRY_LEAD_MS, maxWait: maxWaitMs },
        );
        for (const hook of hooks) hook();
        return result;
      } catch (err) {
        const cause = retryCause(err);
        if (attempt >= 3 || cause === null) throw this.outOfServiceIfUnanswered(err, answersBefore, maxWaitMs);
        this.retries[cause] += 1;
      }
    }
  }

  /** Runs `hook` once the transaction `tx` has committed (never if it rolls back). */
  afterCommit(tx: Tx, hook: () => void): void {
    const hooks = this.afterCommitHooks.get(tx);
    if (hooks) {
      if (!hooks.includes(hook)) hooks.push(hook);
    } else {
      hook();
    }
  }

  async ping(): Promise<boolean> {
    try {
      await this.prisma.$queryRaw`SELECT 1`;
      return true;
    } catch {
      return false;
    }
  }

  async close(): Promise<void> {
    await this.prisma.$disconnect();
    if (!this.pool.ended) await this.pool.end();
  }
}

/**
 * Why a failed transaction may run again: it rolled back as a whole (deadlock victim,
 * serialisation failure, or its connection was terminated by the server while a statement ran),
 * so nothing of it committed.
 */
function retryCause(err: unknown): 'deadlock' | 'serialization' | 'connectionLost' | null {
  const text = String((err as { message?: string })?.message ?? '');
  if (/40P01|deadlock detected/.test(text)) return 'deadlock';
  if (/40001|could not serialize|P2034/.test(text)) return 'serialization';
  if (/^57P0[123]$/.test(String((err as { code?: string })?.code ?? ''))) return 'connectionLost';
  if (/Code: `57P0[123]`|terminating connection due to administrator command/.test(text)) return 'connectionLost';
  return null;
}

/** A wait for a pool connection that ran out: `pg`'s pool, `Database.query`'s own, Prisma's `maxWait`. */
function isPoolWaitTimeout(err: unknown): boolean {
  return /timeout exceeded when trying to connect|Unable to start a transaction in the given time/.test(
    String((err as { message?: string })?.message ?? ''),
  );
}

/**
 * `Database.outOfServiceIfUnanswered`: SQLSTATE 08001 (the client could not establish a
 * connection), which `isDatabaseOutOfService` reads as the server out of service.
 */
class DatabaseOutOfServiceError extends Error {
  readonly code = '08001';
  constructor(message: string, cause: unknown) {
    super(message, { cause });
    this.name = 'DatabaseOutOfServiceError';
  }
}

/**
 * The database cannot take work now (pool exhausted, server unreachable, restarting): the
 * request may succeed later, so callers answer 503 with Retry-After instead of a 500.
 */
export function isDatabaseUnavailable(err: unknown): boolean {
  const e = err as { code?: string; message?: string };
  const text = String(e?.message ?? '');
  return (
    isDatabaseOutOfService(err) ||
    e?.code === 'P2028' ||
    e?.code === '53300' ||
    /Unable to start a transaction|Transaction already closed|timeout exceeded when trying to connect|53300|too many clients/.test(text)
  );
}

/**
 * The database server is out of service as a whole: nothing the gateway does can succeed until it
 * is back, whatever the work. Two kinds:
 * - it cannot be reached or went away (down, restarting, recovering from a crash, shutting down,
 *   failing over): Prisma P1001/P1017, SQLSTATE 57P01–57P03 and class 08, a refused or reset
 *   connection;
 * - it answers but takes no writes (`isDatabaseRefusingWrites`): read-only, or its disk is full.
 * A wait for a pool connection during which the server answered nothing on that pool is the
 * first kind too (`DatabaseOutOfServiceError`, 08001). Not a busy server (pool exhausted, too many clients, a transaction that timed out): those can come
 * from the work itself. Consumers retry these in place for minutes rather than park the message
 * (`classifyConsumerError` in libs/service-kit). The texts also match a connection refused or reset
 * by another server a handler talks to (the broker's `KafkaJSConnectionError` says ECONNREFUSED
 * too): waiting for it is as right, since parking goes through the broker as well.
 */
export function isDatabaseOutOfService(err: unknown): boolean {
  const e = err as { code?: string; message?: string };
  const text = String(e?.message ?? '');
  return (
    isDatabaseRefusingWrites(err) ||
    e?.code === 'P1001' ||
    e?.code === 'P1017' ||
    // plain `pg` (the prepared hot-path statements): the server's SQLSTATE is the error's `code` and
    // the message is the server's text, e.g. 57P01 "terminating connection due to administrator command"
    /^(57P0[123]|08\d{3})$/.test(String(e?.code ?? '')) ||
    /terminating connection/.test(text) ||
    /Can't reach database server|Connection terminated|ECONNREFUSED|ECONNRESET|57P0[123]/.test(text)
  );
}

/**
 * The server answers but refuses every write: 25006 `read_only_sql_transaction` (every transaction
 * read-only, as managed databases make them when their storage fills, or a standby after a failover
 * that went the wrong way) or 53100 `disk_full` (a table or the WAL cannot grow). Every write path
 * of the gateway fails alike until an operator acts, so this is the server's state, not the
 * work's: `pg` gives the SQLSTATE as `code`, Prisma's raw queries quote it ("Code: `25006`").
 */
export function isDatabaseRefusingWrites(err: unknown): boolean {
  const e = err as { code?: string; message?: string };
  const text = String(e?.message ?? '');
  return (
    /^(25006|53100)$/.test(String(e?.code ?? '')) || /Code: `(25006|53100)`|in a read-only transaction|No space left on device/.test(text)
  );
}

/**
 * A write that failed for a reason that can pass by itself: the database was unavailable, the
 * transaction was a deadlock or serialisation victim, its connection was terminated, or a statement
 * or lock wait timed out. Whether the write committed may be unknown (a connection lost after
 * COMMIT was sent), so a caller that retries must make the second run recognise the first.
 */
export function isTransientDatabaseError(err: unknown): boolean {
  if (isDatabaseUnavailable(err) || retryCause(err) !== null) return true;
  const text = String((err as { message?: string })?.message ?? '');
  return /57014|55P03|canceling statement due to (statement|lock) timeout|lock timeout/.test(text);
}

/** Postgres unique violation (directly or wrapped by Prisma as P2002). */
export function isUniqueViolation(err: unknown): boolean {
  const e = err as { code?: string; message?: string };
  return e?.code === 'P2002' || /23505|Unique constraint/.test(String(e?.message ?? ''));
}
