import { Database, OutboxRepository, PolicyRepository } from '@gateway/db';
import { parseTokenCommand, runTokenCommand } from './operator-token';

/** npm run operator-token -- issue|list|revoke (against DATABASE_URL). */
async function main(): Promise<void> {
  const cmd = parseTokenCommand(process.argv.slice(2));
  const url = process.env.DATABASE_URL;
  if (!url) throw new Error('set DATABASE_URL');
  const db = new Database(url, { poolMax: 1 });
  try {
    const out = await runTokenCommand(cmd, new PolicyRepository(db, new OutboxRepository(db)), new Date());
    process.stdout.write(JSON.stringify(out, null, 2) + '\n');
  } finally {
    await db.close();
  }
}

main().catch((err: Error) => {
  console.error(err.message);
  process.exit(1);
});
