/**
 * Applies pending prisma/migrations to DATABASE_URL (the project's `prisma migrate deploy`).
 *
 *   DATABASE_URL=postgresql://... node -r @swc-node/register libs/db/src/migrations/migrate.cli.ts [migrationsDir]
 *
 * Exit codes: 0 applied or nothing to apply, 1 migration refused or failed, 2 usage error.
 */
import { migrate, MigrationError } from './migrate';

/** host/database only: never print credentials. */
function describeTarget(databaseUrl: string): string {
  try {
    const url = new URL(databaseUrl);
    const schema = url.searchParams.get('schema');
    return `${url.hostname}${url.port ? `:${url.port}` : ''}${url.pathname}${schema ? ` (schema ${schema})` : ''}`;
  } catch {
    return '<unparseable DATABASE_URL>';
  }
}

async function main(argv: string[]): Promise<number> {
  if (argv.includes('--help') || argv.includes('-h') || argv.length > 1) {
    console.error('usage: DATABASE_URL=postgresql://... migrate.cli.ts [migrationsDir]');
    return argv.length > 1 ? 2 : 0;
  }
  const databaseUrl = process.env.DATABASE_URL;
  if (!databaseUrl) {
    console.error('DATABASE_URL is not set; refusing to guess which database to migrate.');
    return 2;
  }

  console.log(`Migrating ${describeTarget(databaseUrl)}`);
  try {
    const { applied } = await migrate(databaseUrl, {
      migrationsDir: argv[0],
      log: (msg) => console.log(`  ${msg}`),
    });
    if (applied.length === 0) {
      console.log('Database is up to date; no migrations applied.');
    } else {
      console.log(`Applied ${applied.length} migration(s):`);
      for (const name of applied) console.log(`  - ${name}`);
    }
    return 0;
  } catch (err) {
    if (err instanceof MigrationError) {
      console.error(`Migration refused or failed [${err.code}]: ${err.message}`);
    } else {
      console.error(`Migration failed: ${err instanceof Error ? err.message : String(err)}`);
    }
    return 1;
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err) => {
    console.error(err);
    process.exitCode = 1;
  },
);
