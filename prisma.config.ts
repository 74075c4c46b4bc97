// Prisma CLI configuration. The runtime client connects through @prisma/adapter-pg; migrations are
// applied by libs/db's own runner (Prisma's engines cannot be downloaded here), which records them
// in _prisma_migrations exactly like `prisma migrate deploy`.
import { defineConfig } from 'prisma/config';

export default defineConfig({
  schema: 'prisma/schema.prisma',
  migrations: { path: 'prisma/migrations' },
  datasource: { url: process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/gateway' },
});
