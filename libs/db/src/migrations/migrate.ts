/**
 * Migration runner compatible with `prisma migrate deploy` (Prisma's schema engine cannot be
 * downloaded here, so we apply prisma/migrations ourselves and keep Prisma's bookkeeping).
 *
 * Compatibility with Prisma Migrate:
 * - the history lives in `_prisma_migrations`, created with the schema engine's exact DDL;
 * - a migration's checksum is the SHA-256 (lower-case hex) of its migration.sql text, and a stored
 *   checksum is compared line-ending-agnostically, as the engine does;
 * - migration folders are applied in the order the Prisma CLI lists them (`localeCompare` of the
 *   folder names); folders without a migration.sql are an error, files at the top level are ignored;
 * - `migration_lock.toml` must name the postgresql provider when present;
 * - the session advisory lock 72707369 (Prisma Migrate's lock key) serialises concurrent runners,
 *   including a real `prisma migrate deploy`;
 * - a database without `_prisma_migrations` must be empty before the first migration (P3005);
 * - a failed migration (finished_at and rolled_back_at both null) blocks everything (P3009).
 *
 * Deliberate differences:
 * - each migration runs inside its own transaction together with the UPDATE that marks it finished,
 *   so a failure leaves no half-applied schema (the row stays as a failed record with its logs);
 *   scripts must therefore not contain statements that cannot run in a transaction block
 *   (e.g. CREATE INDEX CONCURRENTLY) — Prisma's engine cannot run those in a multi-statement script
 *   either;
 * - an applied migration whose migration.sql no longer matches its recorded checksum is refused
 *   (`prisma migrate deploy` only reports that in `migrate status`/`migrate dev`).
 */
import { createHash, randomUUID } from 'node:crypto';
import { promises as fs, type Dirent } from 'node:fs';
import path from 'node:path';
import { Client } from 'pg';

/** Prisma Migrate's advisory lock key (schema-engine postgres flavour). */
export const PRISMA_MIGRATE_LOCK_KEY = 72707369;

export const MIGRATIONS_TABLE = '_prisma_migrations';

/** The repository's prisma/migrations (this file lives in libs/db/src/migrations). */
export const DEFAULT_MIGRATIONS_DIR = path.resolve(__dirname, '..', '..', '..', '..', 'prisma', 'migrations');

const MIGRATION_SCRIPT = 'migration.sql';
const LOCK_FILE = 'migration_lock.toml';
const PROVIDER = 'postgresql';
const DEFAULT_LOCK_TIMEOUT_MS = 120_000;

/** Tables Prisma ignores when deciding whether a database is empty (PostGIS). */
const IGNORED_TABLES = [/^spatial_ref_sys$/i, /^geometry_columns$/i];

export interface MigrateOptions {
  /** Folder holding `<timestamp>_<name>/migration.sql`; defaults to the repository's prisma/migrations. */
  migrationsDir?: string;
  /** Progress messages (one line each). Silent by default. */
  log?: (msg: string) => void;
  /** How long to wait for another runner's migration lock before failing (default 120 s). */
  lockTimeoutMs?: number;
}

export interface MigrateResult {
  /** Names of the migrations applied by this call, in order; empty when the database was current. */
  applied: string[];
}

export type MigrationErrorCode =
  | 'P3005' // database schema is not empty but has no migration history
  | 'P3009' // failed migrations found in the target database
  | 'P3018' // a migration failed to apply
  | 'P3019' // migration_lock.toml names a different provider
  | 'CHECKSUM_MISMATCH'
  | 'INVALID_MIGRATIONS_DIR'
  | 'LOCK_TIMEOUT';

export class MigrationError extends Error {
  constructor(
    readonly code: MigrationErrorCode,
    message: string,
    readonly migrationName?: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'MigrationError';
  }
}

/** A migration folder on disk. */
export interface LocalMigration {
  name: string;
  script: string;
  checksum: string;
}

/** A row of `_prisma_migrations`. */
export interface MigrationRecord {
  id: string;
  checksum: string;
  migration_name: string;
  finished_at: Date | null;
  rolled_back_at: Date | null;
  started_at: Date;
  logs: string | null;
  applied_steps_count: number;
}

// ------------------------------------------------------------------------------------ pure parts

/** SHA-256 of the script's UTF-8 bytes, as 64 lower-case hex digits (Prisma's checksum format). */
export function checksumOf(script: string): string {
  return createHash('sha256').update(script, 'utf8').digest('hex');
}

/** The pre-2.21 engine wrote checksums without zero-padding each byte; Prisma still accepts those. */
function unpaddedChecksumOf(script: string): string {
  return Array.from(createHash('sha256').update(script, 'utf8').digest(), (b) => b.toString(16)).join('');
}

/**
 * Whether a script matches a stored checksum, ignoring LF/CRLF differences (git may rewrite line
 * endings) exactly like the schema engine does.
 */
export function scriptMatchesChecksum(script: string, checksum: string): boolean {
  const variants = [script, script.replace(/\r\n/g, '\n'), script.replace(/\n/g, '\r\n')];
  const legacy = checksum.length !== 0 && checksum.length !== 64;
  return variants.some((v) => (legacy ? unpaddedChecksumOf(v) : checksumOf(v)) === checksum);
}

/** Folder order used by the Prisma CLI when it lists prisma/migrations. */
export function sortMigrationNames(names: readonly string[]): string[] {
  return [...names].sort((a, b) => a.localeCompare(b));
}

/** The provider named in migration_lock.toml, read the way the schema engine reads it. */
export function readLockfileProvider(content: string): string {
  const line = content.split(/\r?\n/).find((l) => l.startsWith('provider'));
  if (!line) return '<PROVIDER NOT FOUND>';
  return line.replace(/^provider = /, '').replace(/^"+|"+$/g, '');
}

export interface MigrationPlan {
  /** Local migrations not yet applied, in application order. */
  pending: LocalMigration[];
  /** Applied migrations that no longer exist locally (allowed, like `migrate deploy`). */
  missingLocally: string[];
}

/**
 * Decides what to apply, or refuses: failed migrations in the history, or applied migrations whose
 * migration.sql was edited afterwards.
 * @param local migrations on disk, already in application order
 * @param records the rows of `_prisma_migrations`
 */
export function planMigrations(local: readonly LocalMigration[], records: readonly MigrationRecord[]): MigrationPlan {
  const failed = records.filter((r) => r.finished_at === null && r.rolled_back_at === null);
  if (failed.length > 0) {
    const details = failed
      .map((r) => {
        const logs = r.logs?.trim() ? ` with the following logs:\n${r.logs.trim()}` : '';
        return `The \`${r.migration_name}\` migration started at ${r.started_at.toISOString()} failed${logs}`;
      })
      .join('\n');
    throw new MigrationError(
      'P3009',
      'Found failed migrations in the target database; new migrations will not be applied.\n' +
        `${details}\n` +
        'Fix the database by hand, then mark the failed attempt as rolled back ' +
        `(UPDATE "${MIGRATIONS_TABLE}" SET rolled_back_at = now() WHERE id = '<id>') to re-apply it, ` +
        "or as applied if you completed it manually (the equivalent of 'prisma migrate resolve').",
      failed[0].migration_name,
    );
  }

  const active = records.filter((r) => r.rolled_back_at === null);
  const edited: { name: string; detail: string }[] = [];
  for (const m of local) {
    const record = active.find((r) => r.migration_name === m.name && !scriptMatchesChecksum(m.script, r.checksum));
    if (record) edited.push({ name: m.name, detail: `\`${m.name}\` (recorded ${record.checksum}, file now ${m.checksum})` });
  }
  if (edited.length > 0) {
    throw new MigrationError(
      'CHECKSUM_MISMATCH',
      `Applied migration(s) were modified after they were applied: ${edited.map((e) => e.detail).join(', ')}. ` +
        'Restore the original migration.sql and put the change in a new migration.',
      edited[0].name,
    );
  }

  const appliedNames = new Set(active.map((r) => r.migration_name));
  const localNames = new Set(local.map((m) => m.name));
  return {
    pending: local.filter((m) => !appliedNames.has(m.name)),
    missingLocally: [...appliedNames].filter((n) => !localNames.has(n)),
  };
}

/** Splits Prisma's `?schema=` connection-string parameter off (the pg driver does not know it). */
export function splitSchemaParam(databaseUrl: string): { connectionString: string; schema?: string } {
  let url: URL;
  try {
    url = new URL(databaseUrl);
  } catch {
    return { connectionString: databaseUrl };
  }
  const schema = url.searchParams.get('schema');
  if (!schema) return { connectionString: databaseUrl };
  url.searchParams.delete('schema');
  return { connectionString: url.toString(), schema };
}

const quoteIdent = (name: string): string => `"${name.replace(/"/g, '""')}"`;

// ------------------------------------------------------------------------------------ file system

/** Reads the migrations folder the way the Prisma CLI does, checking migration_lock.toml. */
export async function readMigrationsDir(dir: string): Promise<LocalMigration[]> {
  let entries: Dirent[];
  try {
    entries = await fs.readdir(dir, { withFileTypes: true });
  } catch (err) {
    throw new MigrationError('INVALID_MIGRATIONS_DIR', `Cannot read migrations folder ${dir}: ${String(err)}`, undefined, {
      cause: err,
    });
  }

  const lock = await fs.readFile(path.join(dir, LOCK_FILE), 'utf8').catch(() => null);
  if (lock !== null) {
    const provider = readLockfileProvider(lock);
    if (provider !== PROVIDER) {
      throw new MigrationError(
        'P3019',
        `${path.join(dir, LOCK_FILE)} was created for provider "${provider}", but this runner only applies "${PROVIDER}" migrations.`,
      );
    }
  }

  const names = sortMigrationNames(entries.filter((e) => e.isDirectory()).map((e) => e.name));
  const out: LocalMigration[] = [];
  for (const name of names) {
    const file = path.join(dir, name, MIGRATION_SCRIPT);
    let script: string;
    try {
      script = await fs.readFile(file, 'utf8');
    } catch (err) {
      throw new MigrationError('INVALID_MIGRATIONS_DIR', `Failed to read migration script at ${file}: ${String(err)}`, name, {
        cause: err,
      });
    }
    out.push({ name, script, checksum: checksumOf(script) });
  }
  return out;
}

// ------------------------------------------------------------------------------------ database

/** The schema engine's DDL for the history table (postgres flavour), verbatim. */
const CREATE_MIGRATIONS_TABLE = `CREATE TABLE ${MIGRATIONS_TABLE} (
    id                      VARCHAR(36) PRIMARY KEY NOT NULL,
    checksum                VARCHAR(64) NOT NULL,
    finished_at             TIMESTAMPTZ,
    migration_name          VARCHAR(255) NOT NULL,
    logs                    TEXT,
    rolled_back_at          TIMESTAMPTZ,
    started_at              TIMESTAMPTZ NOT NULL DEFAULT now(),
    applied_steps_count     INTEGER NOT NULL DEFAULT 0
);`;

async function tablesInCurrentSchema(client: Client): Promise<string[]> {
  const res = await client.query<{ name: string }>(
    `SELECT c.relname AS name
       FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE c.relkind IN ('r', 'p') AND n.nspname = current_schema()`,
  );
  return res.rows.map((r) => r.name);
}

/** Like the engine's `initialize`: create the history table, but only in an empty schema. */
async function ensureMigrationsTable(client: Client, log: (m: string) => void): Promise<void> {
  const schema = (await client.query<{ s: string | null }>('SELECT current_schema() AS s')).rows[0].s;
  if (!schema) {
    throw new MigrationError('INVALID_MIGRATIONS_DIR', 'No schema in the search_path exists in the target database.');
  }
  const tables = await tablesInCurrentSchema(client);
  if (tables.includes(MIGRATIONS_TABLE)) return;
  const others = tables.filter((t) => !IGNORED_TABLES.some((re) => re.test(t)));
  if (others.length > 0) {
    throw new MigrationError(
      'P3005',
      `The database schema "${schema}" is not empty (found ${others.length} table(s), e.g. ${others.slice(0, 5).join(', ')}) ` +
        `but has no ${MIGRATIONS_TABLE} table. Baseline it first (see https://pris.ly/d/migrate-baseline).`,
    );
  }
  log(`Creating ${MIGRATIONS_TABLE} in schema "${schema}"`);
  await client.query(CREATE_MIGRATIONS_TABLE);
}

async function loadRecords(client: Client): Promise<MigrationRecord[]> {
  const res = await client.query<MigrationRecord>(
    `SELECT id, checksum, finished_at, migration_name, logs, rolled_back_at, started_at, applied_steps_count
       FROM ${MIGRATIONS_TABLE} ORDER BY started_at ASC`,
  );
  return res.rows;
}

async function acquireLock(client: Client, timeoutMs: number, log: (m: string) => void): Promise<void> {
  const tried = await client.query<{ ok: boolean }>('SELECT pg_try_advisory_lock($1) AS ok', [PRISMA_MIGRATE_LOCK_KEY]);
  if (tried.rows[0].ok) return;
  log('Another migration runner holds the migration lock; waiting for it to finish');
  await client.query(`SET lock_timeout = ${Math.max(1, Math.floor(timeoutMs))}`);
  try {
    await client.query('SELECT pg_advisory_lock($1)', [PRISMA_MIGRATE_LOCK_KEY]);
  } catch (err) {
    if ((err as { code?: string }).code === '55P03') {
      throw new MigrationError(
        'LOCK_TIMEOUT',
        `Timed out after ${timeoutMs} ms waiting for the migration advisory lock (pg_advisory_lock(${PRISMA_MIGRATE_LOCK_KEY})).`,
        undefined,
        { cause: err },
      );
    }
    throw err;
  } finally {
    await client.query('RESET lock_timeout');
  }
}

function describePgError(err: unknown): string {
  const e = err as { message?: string; code?: string; position?: string; detail?: string; hint?: string };
  const parts = [`Database error: ${e?.message ?? String(err)}`];
  if (e?.code) parts.push(`Database error code: ${e.code}`);
  if (e?.position) parts.push(`Position: ${e.position}`);
  if (e?.detail) parts.push(`Detail: ${e.detail}`);
  if (e?.hint) parts.push(`Hint: ${e.hint}`);
  return parts.join('\n');
}

async function applyMigration(client: Client, m: LocalMigration): Promise<void> {
  const id = randomUUID();
  // Recorded outside the migration's transaction so that a failure stays visible (P3009).
  await client.query(`INSERT INTO ${MIGRATIONS_TABLE} (id, checksum, started_at, migration_name) VALUES ($1, $2, now(), $3)`, [
    id,
    m.checksum,
    m.name,
  ]);
  try {
    await client.query('BEGIN');
    // Simple-query protocol (no parameters): the whole multi-statement script in one round trip.
    if (m.script.trim() !== '') await client.query(m.script);
    await client.query(
      `UPDATE ${MIGRATIONS_TABLE}
          SET applied_steps_count = applied_steps_count + 1, finished_at = clock_timestamp()
        WHERE id = $1`,
      [id],
    );
    await client.query('COMMIT');
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    const logs =
      'A migration failed to apply. New migrations cannot be applied before the error is recovered from.\n\n' +
      `Migration name: ${m.name}\n\n${describePgError(err)}`;
    await client.query(`UPDATE ${MIGRATIONS_TABLE} SET logs = $2 WHERE id = $1`, [id, logs]).catch(() => undefined);
    throw new MigrationError('P3018', `Migration \`${m.name}\` failed to apply (rolled back): ${describePgError(err)}`, m.name, {
      cause: err,
    });
  }
}

/**
 * Applies every pending migration of `migrationsDir` to the database, like `prisma migrate deploy`.
 * Safe to call from several processes at once: they serialise on Prisma's advisory lock and each
 * migration is applied exactly once. Throws {@link MigrationError} when it refuses or a script fails.
 */
export async function migrate(databaseUrl: string, opts: MigrateOptions = {}): Promise<MigrateResult> {
  const migrationsDir = opts.migrationsDir ?? DEFAULT_MIGRATIONS_DIR;
  const log = opts.log ?? (() => undefined);
  const local = await readMigrationsDir(migrationsDir);
  log(`${local.length} migration(s) found in ${migrationsDir}`);

  const { connectionString, schema } = splitSchemaParam(databaseUrl);
  const client = new Client({ connectionString, application_name: 'gateway-migrate' });
  // A dropped connection is reported by the pending query; without a listener it would crash the process.
  client.on('error', () => undefined);
  await client.connect();
  const applied: string[] = [];
  try {
    await acquireLock(client, opts.lockTimeoutMs ?? DEFAULT_LOCK_TIMEOUT_MS, log);
    try {
      if (schema) {
        await client.query(`CREATE SCHEMA IF NOT EXISTS ${quoteIdent(schema)}`);
        await client.query(`SET search_path TO ${quoteIdent(schema)}`);
      }
      await ensureMigrationsTable(client, log);
      const plan = planMigrations(local, await loadRecords(client));
      for (const name of plan.missingLocally) {
        log(`Warning: migration \`${name}\` is recorded as applied but is not in ${migrationsDir}`);
      }
      if (plan.pending.length === 0) log('No pending migrations to apply.');
      for (const m of plan.pending) {
        log(`Applying migration \`${m.name}\``);
        await applyMigration(client, m);
        applied.push(m.name);
      }
    } finally {
      await client.query('SELECT pg_advisory_unlock($1)', [PRISMA_MIGRATE_LOCK_KEY]).catch(() => undefined);
    }
  } finally {
    await client.end().catch(() => undefined);
  }
  return { applied };
}
