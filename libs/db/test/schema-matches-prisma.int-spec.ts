/**
 * The committed migrations, applied by our runner, produce exactly the database prisma/schema.prisma
 * describes; and the runner behaves like `prisma migrate deploy` (idempotent, checksum-guarded,
 * safe under concurrent starts).
 *
 * Model definitions come from Prisma itself (see prisma-dmmf.ts), never re-typed here.
 * Every test works in throwaway databases created on the server of DATABASE_URL (default: local
 * postgres) and dropped at the end.
 */
import { createHash, randomBytes } from 'node:crypto';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client } from 'pg';
import { DEFAULT_MIGRATIONS_DIR, migrate, MIGRATIONS_TABLE, MigrationError, readMigrationsDir } from '../src/migrations/migrate';
import { type DmmfField, type DmmfModel, loadDmmf } from './prisma-dmmf';

const SERVER_URL = process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/postgres';
const PG_IDENTIFIER_MAX = 63;

// ------------------------------------------------------------------------------ throwaway databases

const created: string[] = [];

function urlFor(database: string): string {
  const url = new URL(SERVER_URL);
  url.pathname = `/${database}`;
  url.searchParams.delete('schema'); // fresh databases: everything lives in public
  return url.toString();
}

async function withClient<T>(url: string, fn: (c: Client) => Promise<T>): Promise<T> {
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

async function createDatabase(label: string): Promise<string> {
  const name = `schema_test_${label}_${process.pid}_${randomBytes(4).toString('hex')}`;
  await withClient(SERVER_URL, (c) => c.query(`CREATE DATABASE "${name}"`));
  created.push(name);
  return urlFor(name);
}

afterAll(async () => {
  await withClient(SERVER_URL, async (c) => {
    for (const name of created) await c.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
  });
});

/** A scratch copy of prisma/migrations, optionally with extra migrations appended. */
function migrationsCopy(extra: Record<string, string> = {}): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'migrations-copy-'));
  cpSync(DEFAULT_MIGRATIONS_DIR, dir, { recursive: true });
  for (const [name, sql] of Object.entries(extra)) {
    mkdirSync(path.join(dir, name));
    writeFileSync(path.join(dir, name, 'migration.sql'), sql);
  }
  scratchDirs.push(dir);
  return dir;
}
const scratchDirs: string[] = [];
afterAll(() => scratchDirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

async function historyRows(url: string) {
  return withClient(url, async (c) => {
    const res = await c.query(`SELECT * FROM ${MIGRATIONS_TABLE} ORDER BY started_at, migration_name`);
    return res.rows as Array<{
      id: string;
      checksum: string;
      finished_at: Date | null;
      migration_name: string;
      logs: string | null;
      rolled_back_at: Date | null;
      started_at: Date;
      applied_steps_count: number;
    }>;
  });
}

// ------------------------------------------------------------------------------ expectations from the DMMF

const datamodel = loadDmmf();
const models = datamodel.models;

const tableOf = (m: DmmfModel): string => m.dbName ?? m.name;
const columnOf = (f: DmmfField): string => f.dbName ?? f.name;
const scalarFields = (m: DmmfModel): DmmfField[] => m.fields.filter((f) => f.kind === 'scalar' || f.kind === 'enum');
const fieldByName = (m: DmmfModel, name: string): DmmfField => {
  const f = m.fields.find((x) => x.name === name);
  if (!f) throw new Error(`${m.name}.${name} not found in DMMF`);
  return f;
};
const modelByName = (name: string): DmmfModel => {
  const m = models.find((x) => x.name === name);
  if (!m) throw new Error(`model ${name} not found in DMMF`);
  return m;
};

/** Prisma's default constraint names: `{table}_{columns}` cut to fit the identifier limit, plus suffix. */
function defaultConstraintName(table: string, columns: string[], suffix: '_pkey' | '_key' | '_idx' | '_fkey'): string {
  const base = suffix === '_pkey' ? table : `${table}_${columns.join('_')}`;
  return base.slice(0, PG_IDENTIFIER_MAX - suffix.length) + suffix;
}

interface ExpectedColumn {
  data_type: string;
  udt_name: string;
  datetime_precision: number | null;
  is_nullable: 'YES' | 'NO';
}

/** Prisma type (+ native type) → what information_schema.columns reports for the column. */
function expectedColumn(f: DmmfField): ExpectedColumn {
  const native = f.nativeType ? `${f.nativeType[0]}(${f.nativeType[1].join(',')})` : null;
  let scalar: Omit<ExpectedColumn, 'is_nullable'>;
  switch (`${f.type}${native ? ` @db.${native}` : ''}`) {
    case 'String':
      scalar = { data_type: 'text', udt_name: 'text', datetime_precision: null };
      break;
    case 'Int':
      scalar = { data_type: 'integer', udt_name: 'int4', datetime_precision: null };
      break;
    case 'BigInt':
      scalar = { data_type: 'bigint', udt_name: 'int8', datetime_precision: null };
      break;
    case 'Float':
      scalar = { data_type: 'double precision', udt_name: 'float8', datetime_precision: null };
      break;
    case 'Boolean':
      scalar = { data_type: 'boolean', udt_name: 'bool', datetime_precision: null };
      break;
    case 'Json':
      scalar = { data_type: 'jsonb', udt_name: 'jsonb', datetime_precision: null };
      break;
    case 'Json @db.Json()':
      scalar = { data_type: 'json', udt_name: 'json', datetime_precision: null };
      break;
    case 'DateTime':
      scalar = { data_type: 'timestamp without time zone', udt_name: 'timestamp', datetime_precision: 3 };
      break;
    case 'DateTime @db.Date()':
      scalar = { data_type: 'date', udt_name: 'date', datetime_precision: 0 };
      break;
    case 'DateTime @db.Timestamptz(3)':
      scalar = { data_type: 'timestamp with time zone', udt_name: 'timestamptz', datetime_precision: 3 };
      break;
    default:
      throw new Error(
        `${f.name}: no Postgres mapping for ${f.type}${native ? ` @db.${native}` : ''} in this test; extend expectedColumn()`,
      );
  }
  if (f.isList) {
    // Prisma renders scalar lists as nullable arrays (`TEXT[]`, no NOT NULL) although the field is not optional.
    return { data_type: 'ARRAY', udt_name: `_${scalar.udt_name}`, datetime_precision: null, is_nullable: 'YES' };
  }
  return { ...scalar, is_nullable: f.isRequired ? 'NO' : 'YES' };
}

/** Prisma @default(...) → information_schema.columns.column_default (null: no default). */
function expectedDefault(f: DmmfField): string | RegExp | null {
  if (!f.hasDefaultValue) return null;
  const d = f.default as { name?: string } | string | number | boolean | undefined;
  if (typeof d === 'object' && d !== null && d.name === 'now') return 'CURRENT_TIMESTAMP';
  if (typeof d === 'object' && d !== null && d.name === 'autoincrement') return /^nextval\('.+_seq'::regclass\)$/;
  if (typeof d === 'number' || (typeof d === 'string' && /^-?\d+$/.test(d) && f.type !== 'String')) return String(d);
  if (typeof d === 'boolean') return String(d);
  if (Array.isArray(d) && d.length === 0 && f.type === 'String') return 'ARRAY[]::text[]';
  // a text literal, as Postgres prints it back ('' included)
  if (typeof d === 'string' && f.type === 'String') return `'${d.replace(/'/g, "''")}'::text`;
  throw new Error(`${f.name}: default ${JSON.stringify(d)} not handled by this test; extend expectedDefault()`);
}

const FK_ACTIONS: Record<string, string> = { a: 'NoAction', r: 'Restrict', c: 'Cascade', n: 'SetNull', d: 'SetDefault' };

// ------------------------------------------------------------------------------ the migrated database

let url: string;
let firstRun: { applied: string[] };

beforeAll(async () => {
  url = await createDatabase('main');
  firstRun = await migrate(url);
});

async function q<T>(sql: string, params: unknown[] = []): Promise<T[]> {
  return withClient(url, async (c) => (await c.query(sql, params)).rows as T[]);
}

describe('migrate() on an empty database', () => {
  it('applies every migration folder, in order', async () => {
    const local = await readMigrationsDir(DEFAULT_MIGRATIONS_DIR);
    expect(local.length).toBeGreaterThan(0);
    expect(firstRun.applied).toEqual(local.map((m) => m.name));
  });

  it("creates _prisma_migrations with Prisma Migrate's exact columns", async () => {
    const cols = await q<Record<string, unknown>>(
      `SELECT column_name, data_type, character_maximum_length, is_nullable, column_default
         FROM information_schema.columns WHERE table_schema = 'public' AND table_name = $1 ORDER BY ordinal_position`,
      [MIGRATIONS_TABLE],
    );
    expect(cols).toEqual([
      { column_name: 'id', data_type: 'character varying', character_maximum_length: 36, is_nullable: 'NO', column_default: null },
      { column_name: 'checksum', data_type: 'character varying', character_maximum_length: 64, is_nullable: 'NO', column_default: null },
      {
        column_name: 'finished_at',
        data_type: 'timestamp with time zone',
        character_maximum_length: null,
        is_nullable: 'YES',
        column_default: null,
      },
      {
        column_name: 'migration_name',
        data_type: 'character varying',
        character_maximum_length: 255,
        is_nullable: 'NO',
        column_default: null,
      },
      { column_name: 'logs', data_type: 'text', character_maximum_length: null, is_nullable: 'YES', column_default: null },
      {
        column_name: 'rolled_back_at',
        data_type: 'timestamp with time zone',
        character_maximum_length: null,
        is_nullable: 'YES',
        column_default: null,
      },
      {
        column_name: 'started_at',
        data_type: 'timestamp with time zone',
        character_maximum_length: null,
        is_nullable: 'NO',
        column_default: 'now()',
      },
      { column_name: 'applied_steps_count', data_type: 'integer', character_maximum_length: null, is_nullable: 'NO', column_default: '0' },
    ]);
    const pk = await q<{ conname: string }>(`SELECT conname FROM pg_constraint WHERE conrelid = $1::regclass AND contype = 'p'`, [
      MIGRATIONS_TABLE,
    ]);
    expect(pk).toEqual([{ conname: '_prisma_migrations_pkey' }]);
  });

  it('records each migration like prisma migrate deploy (checksum = sha256 of migration.sql)', async () => {
    const rows = await historyRows(url);
    expect(rows.map((r) => r.migration_name)).toEqual(firstRun.applied);
    for (const row of rows) {
      const bytes = readFileSync(path.join(DEFAULT_MIGRATIONS_DIR, row.migration_name, 'migration.sql'));
      expect(row.checksum).toBe(createHash('sha256').update(bytes).digest('hex'));
      expect(row.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
      expect(row.finished_at).toBeInstanceOf(Date);
      expect(row.finished_at!.getTime()).toBeGreaterThanOrEqual(row.started_at.getTime());
      expect(row.rolled_back_at).toBeNull();
      expect(row.logs).toBeNull();
      expect(row.applied_steps_count).toBe(1);
    }
  });
});

describe('the migrated database matches prisma/schema.prisma', () => {
  it('the DMMF is the real schema (sanity)', () => {
    expect(models.length).toBeGreaterThan(0);
    expect(models.every((m) => m.schema === null)).toBe(true); // no @@schema: all tables in public
  });

  it('has exactly one table per model, plus _prisma_migrations', async () => {
    const tables = await q<{ table_name: string }>(
      `SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE'`,
    );
    expect(tables.map((t) => t.table_name).sort()).toEqual([...models.map(tableOf), MIGRATIONS_TABLE].sort());
    const others = await q<{ n: string }>(
      `SELECT count(*) AS n FROM information_schema.tables WHERE table_schema NOT IN ('public', 'pg_catalog', 'information_schema')`,
    );
    expect(Number(others[0].n)).toBe(0);
  });

  describe.each(models.map((m) => [m.name, m] as const))('%s', (_name, model) => {
    const table = tableOf(model);

    it('has exactly the model’s scalar columns with the right type, nullability and default', async () => {
      const rows = await q<{
        column_name: string;
        data_type: string;
        udt_name: string;
        datetime_precision: number | null;
        is_nullable: 'YES' | 'NO';
        column_default: string | null;
      }>(
        `SELECT column_name, data_type, udt_name, datetime_precision, is_nullable, column_default
           FROM information_schema.columns WHERE table_schema = 'public' AND table_name = $1`,
        [table],
      );
      const actual = new Map(rows.map((r) => [r.column_name, r]));
      expect([...actual.keys()].sort()).toEqual(scalarFields(model).map(columnOf).sort());

      for (const field of scalarFields(model)) {
        const { data_type, udt_name, datetime_precision, is_nullable, column_default } = actual.get(columnOf(field))!;
        const expected = expectedColumn(field);
        expect({ field: field.name, data_type, udt_name, datetime_precision, is_nullable }).toEqual({ field: field.name, ...expected });
        const def = expectedDefault(field);
        expect({ field: field.name, column_default }).toEqual({
          field: field.name,
          column_default: def instanceof RegExp ? expect.stringMatching(def) : def,
        });
      }
    });

    it('has the primary key, unique and normal indexes of the model, and no others', async () => {
      const indexes = await q<{ name: string; is_unique: boolean; is_primary: boolean; columns: string[] }>(
        `SELECT i.relname AS name, ix.indisunique AS is_unique, ix.indisprimary AS is_primary,
                array_agg(a.attname::text ORDER BY k.ord) AS columns
           FROM pg_index ix
           JOIN pg_class t ON t.oid = ix.indrelid
           JOIN pg_class i ON i.oid = ix.indexrelid
           JOIN pg_namespace n ON n.oid = t.relnamespace
           CROSS JOIN LATERAL unnest(ix.indkey) WITH ORDINALITY AS k(attnum, ord)
           JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.attnum
          WHERE n.nspname = 'public' AND t.relname = $1
          GROUP BY i.relname, ix.indisunique, ix.indisprimary`,
        [table],
      );

      const expected = datamodel.indexes
        .filter((ix) => ix.model === model.name)
        .map((ix) => {
          if (ix.type === 'fulltext') throw new Error('fulltext indexes are not supported on PostgreSQL');
          const columns = ix.fields.map((f) => columnOf(fieldByName(model, f.name)));
          const suffix = ix.type === 'id' ? '_pkey' : ix.type === 'unique' ? '_key' : '_idx';
          return {
            name: ix.dbName ?? defaultConstraintName(table, columns, suffix),
            is_unique: ix.type !== 'normal',
            is_primary: ix.type === 'id',
            columns,
          };
        });
      const byName = (a: { name: string }, b: { name: string }) => a.name.localeCompare(b.name);
      expect(expected.filter((e) => e.is_primary)).toHaveLength(1);
      expect([...indexes].sort(byName)).toEqual([...expected].sort(byName));

      // Cross-check against the field-level flags too (@id, @unique, @@id, @@unique).
      const pkColumns = expected.find((e) => e.is_primary)!.columns;
      const idFields = model.primaryKey?.fields ?? model.fields.filter((f) => f.isId).map((f) => f.name);
      expect(pkColumns).toEqual(idFields.map((n) => columnOf(fieldByName(model, n))));
      for (const f of model.fields.filter((x) => x.isUnique)) {
        expect(indexes.some((i) => i.is_unique && !i.is_primary && i.columns.join() === columnOf(f))).toBe(true);
      }
      for (const group of model.uniqueFields) {
        const cols = group.map((n) => columnOf(fieldByName(model, n)));
        expect(indexes.some((i) => i.is_unique && !i.is_primary && i.columns.join() === cols.join())).toBe(true);
      }
    });

    it('has the foreign keys of the model’s relations, and no others', async () => {
      const fks = await q<{
        name: string;
        ref_table: string;
        columns: string[];
        ref_columns: string[];
        on_delete: string;
        on_update: string;
      }>(
        `SELECT c.conname AS name, rt.relname AS ref_table, c.confdeltype AS on_delete, c.confupdtype AS on_update,
                (SELECT array_agg(a.attname::text ORDER BY k.ord) FROM unnest(c.conkey) WITH ORDINALITY AS k(attnum, ord)
                   JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.attnum) AS columns,
                (SELECT array_agg(a.attname::text ORDER BY k.ord) FROM unnest(c.confkey) WITH ORDINALITY AS k(attnum, ord)
                   JOIN pg_attribute a ON a.attrelid = c.confrelid AND a.attnum = k.attnum) AS ref_columns
           FROM pg_constraint c
           JOIN pg_class t ON t.oid = c.conrelid
           JOIN pg_class rt ON rt.oid = c.confrelid
           JOIN pg_namespace n ON n.oid = t.relnamespace
          WHERE c.contype = 'f' AND n.nspname = 'public' AND t.relname = $1`,
        [table],
      );
      const expected = model.fields
        .filter((f) => f.kind === 'object' && (f.relationFromFields?.length ?? 0) > 0)
        .map((f) => {
          const target = modelByName(f.type);
          const columns = f.relationFromFields!.map((n) => columnOf(fieldByName(model, n)));
          return {
            name: defaultConstraintName(table, columns, '_fkey'),
            ref_table: tableOf(target),
            columns,
            ref_columns: f.relationToFields!.map((n) => columnOf(fieldByName(target, n))),
            // Prisma's defaults with foreign keys: Restrict for required relations, SetNull for optional; Cascade on update.
            on_delete: f.relationOnDelete ?? (f.isRequired ? 'Restrict' : 'SetNull'),
            on_update: f.relationOnUpdate ?? 'Cascade',
          };
        });
      const actual = fks.map((fk) => ({ ...fk, on_delete: FK_ACTIONS[fk.on_delete], on_update: FK_ACTIONS[fk.on_update] }));
      const byName = (a: { name: string }, b: { name: string }) => a.name.localeCompare(b.name);
      expect(actual.sort(byName)).toEqual(expected.sort(byName));
    });
  });
});

describe('migrate() behaves like prisma migrate deploy', () => {
  it('applies nothing the second time', async () => {
    const before = await historyRows(url);
    await expect(migrate(url)).resolves.toEqual({ applied: [] });
    expect(await historyRows(url)).toEqual(before);
  });

  it('refuses to run when an applied migration’s recorded checksum no longer matches its file', async () => {
    const db = await createDatabase('tamper');
    await migrate(db);
    const [first] = await historyRows(db);
    await withClient(db, (c) => c.query(`UPDATE ${MIGRATIONS_TABLE} SET checksum = $1 WHERE id = $2`, ['0'.repeat(64), first.id]));
    await expect(migrate(db)).rejects.toMatchObject({ code: 'CHECKSUM_MISMATCH', migrationName: first.migration_name });

    // Likewise when the file is edited after it was applied.
    await withClient(db, (c) => c.query(`UPDATE ${MIGRATIONS_TABLE} SET checksum = $1 WHERE id = $2`, [first.checksum, first.id]));
    const dir = migrationsCopy();
    const file = path.join(dir, first.migration_name, 'migration.sql');
    writeFileSync(file, `${readFileSync(file, 'utf8')}\n-- edited after being applied\n`);
    const err = await migrate(db, { migrationsDir: dir }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(MigrationError);
    expect(err).toMatchObject({ code: 'CHECKSUM_MISMATCH' });
    expect((err as Error).message).toContain(first.migration_name);

    // A CRLF checkout of the same file is not a modification.
    writeFileSync(
      file,
      readFileSync(path.join(DEFAULT_MIGRATIONS_DIR, first.migration_name, 'migration.sql'), 'utf8').replace(/\n/g, '\r\n'),
    );
    await expect(migrate(db, { migrationsDir: dir })).resolves.toEqual({ applied: [] });
  });

  it('rolls back a failing migration, records the failure and refuses to continue until resolved', async () => {
    const db = await createDatabase('failure');
    const broken = '20991231000000_broken';
    const later = '20991231000001_later';
    const dir = migrationsCopy({
      [broken]: 'CREATE TABLE half_done (id INTEGER);\nSELECT * FROM table_that_does_not_exist;\n',
      [later]: 'CREATE TABLE later_table (id INTEGER);\n',
    });

    const err = await migrate(db, { migrationsDir: dir }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'P3018', migrationName: broken });

    const rows = await historyRows(db);
    const failed = rows.find((r) => r.migration_name === broken)!;
    expect(failed.finished_at).toBeNull();
    expect(failed.rolled_back_at).toBeNull();
    expect(failed.applied_steps_count).toBe(0);
    expect(failed.logs).toContain('table_that_does_not_exist');
    expect(rows.some((r) => r.migration_name === later)).toBe(false);
    const leftovers = await withClient(db, (c) => c.query(`SELECT to_regclass('half_done') AS t`));
    expect(leftovers.rows[0].t).toBeNull();

    await expect(migrate(db, { migrationsDir: dir })).rejects.toMatchObject({ code: 'P3009', migrationName: broken });

    // Resolve like `prisma migrate resolve --rolled-back`, fix the script, run again.
    await withClient(db, (c) => c.query(`UPDATE ${MIGRATIONS_TABLE} SET rolled_back_at = now() WHERE id = $1`, [failed.id]));
    writeFileSync(path.join(dir, broken, 'migration.sql'), 'CREATE TABLE half_done (id INTEGER);\n');
    await expect(migrate(db, { migrationsDir: dir })).resolves.toEqual({ applied: [broken, later] });
  });

  it('refuses a non-empty database that has no migration history (P3005)', async () => {
    const db = await createDatabase('nonempty');
    await withClient(db, (c) => c.query('CREATE TABLE legacy (id INTEGER)'));
    await expect(migrate(db)).rejects.toMatchObject({ code: 'P3005' });
  });

  it('applies each migration exactly once when 5 runners start at the same time', async () => {
    const db = await createDatabase('concurrent');
    const dir = migrationsCopy({
      '20991231000000_slow': 'SELECT pg_sleep(0.3);\nCREATE TABLE concurrency_probe (id INTEGER);\n',
      '20991231000001_after_slow': 'INSERT INTO concurrency_probe VALUES (1);\n',
    });
    const expectedNames = (await readMigrationsDir(dir)).map((m) => m.name);
    const logs: string[] = [];

    const results = await Promise.all(
      Array.from({ length: 5 }, (_, i) => migrate(db, { migrationsDir: dir, log: (m) => logs.push(`[${i}] ${m}`) })),
    );

    const appliedByRun = results.map((r) => r.applied);
    expect(appliedByRun.flat().sort()).toEqual([...expectedNames].sort());
    // The lock makes one runner do all the work; the others find nothing pending.
    expect(appliedByRun.filter((a) => a.length > 0)).toEqual([expectedNames]);

    const rows = await historyRows(db);
    expect(rows.map((r) => r.migration_name)).toEqual(expectedNames);
    expect(rows.every((r) => r.finished_at !== null && r.applied_steps_count === 1)).toBe(true);
    const probe = await withClient(db, (c) => c.query('SELECT count(*)::int AS n FROM concurrency_probe'));
    expect(probe.rows[0].n).toBe(1);
    expect(logs.some((l) => l.includes('waiting'))).toBe(true);
  });
});
