import { Database } from '../database';

/** The key that marks a database the demo seed may write to. */
export const DEMO_DATABASE_KEY = 'demo_database';

/** Facts about the database itself (gateway_meta), e.g. that it is a demo database. */
export class GatewayMetaRepository {
  constructor(private readonly db: Database) {}

  async get(key: string): Promise<string | null> {
    const row = await this.db.prisma.gatewayMeta.findUnique({ where: { key } });
    return row?.value ?? null;
  }

  async set(key: string, value: string, now: Date): Promise<void> {
    await this.db.prisma.gatewayMeta.upsert({ where: { key }, create: { key, value, updatedAt: now }, update: { value, updatedAt: now } });
  }
}
