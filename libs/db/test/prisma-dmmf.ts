/**
 * The Prisma DMMF datamodel of a schema, computed by the installed Prisma CLI itself.
 *
 * `@prisma/internals` (getDMMF) is not installed, and the generated client only embeds a trimmed
 * runtime data model (no nullability, ids, unique constraints or native types). So we ask the CLI
 * through its public generator protocol: a copy of the schema gets one extra generator block
 * pointing at dmmf-dump-generator.cjs, and `prisma generate --generator <that one>` hands it the full
 * DMMF, exactly what any Prisma generator (including prisma-client) receives. The project's own
 * generator is not run, and prisma/schema.prisma is never modified.
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export const REPO_ROOT = path.resolve(__dirname, '..', '..', '..');
export const SCHEMA_PATH = path.join(REPO_ROOT, 'prisma', 'schema.prisma');

export interface DmmfField {
  name: string;
  dbName?: string | null;
  kind: 'scalar' | 'object' | 'enum' | 'unsupported';
  type: string;
  isList: boolean;
  isRequired: boolean;
  isUnique: boolean;
  isId: boolean;
  hasDefaultValue: boolean;
  default?: unknown;
  /** e.g. ['Timestamptz', ['3']] for @db.Timestamptz(3) */
  nativeType?: [string, string[]] | null;
  relationName?: string;
  relationFromFields?: string[];
  relationToFields?: string[];
  relationOnDelete?: string;
  relationOnUpdate?: string;
}

export interface DmmfModel {
  name: string;
  dbName: string | null;
  schema: string | null;
  fields: DmmfField[];
  primaryKey: { name: string | null; fields: string[] } | null;
  uniqueFields: string[][];
}

export interface DmmfIndex {
  model: string;
  type: 'id' | 'normal' | 'unique' | 'fulltext';
  isDefinedOnField: boolean;
  /** only set when the schema maps the constraint name explicitly (`map:`) */
  dbName?: string;
  fields: { name: string; sortOrder?: 'asc' | 'desc' }[];
}

export interface DmmfDatamodel {
  models: DmmfModel[];
  enums: unknown[];
  indexes: DmmfIndex[];
}

const GENERATOR_NAME = 'schema_test_dmmf_dump';

/** Prisma string literal (same escaping rules as JSON for what we put in it). */
const prismaString = (s: string): string => JSON.stringify(s);

export function loadDmmf(schemaPath: string = SCHEMA_PATH): DmmfDatamodel {
  const generatorScript = path.join(__dirname, 'dmmf-dump-generator.cjs');
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'prisma-dmmf-'));
  try {
    const out = path.join(tmp, 'datamodel.json');
    const schemaCopy = path.join(tmp, 'schema.prisma');
    const provider = `"${process.execPath}" "${generatorScript}"`;
    writeFileSync(
      schemaCopy,
      `${readFileSync(schemaPath, 'utf8')}\n\ngenerator ${GENERATOR_NAME} {\n` +
        `  provider = ${prismaString(provider)}\n  output   = ${prismaString(path.join(tmp, 'out'))}\n}\n`,
    );

    // The CLI insists on finding a schema engine binary before running `generate`, which never uses it.
    const env: NodeJS.ProcessEnv = { ...process.env, DMMF_DUMP_OUT: out, CHECKPOINT_DISABLE: '1', PRISMA_HIDE_UPDATE_MESSAGE: '1' };
    if (!env.PRISMA_SCHEMA_ENGINE_BINARY || !existsSync(env.PRISMA_SCHEMA_ENGINE_BINARY)) {
      const stub = path.join(tmp, 'schema-engine-stub.sh');
      writeFileSync(stub, '#!/bin/sh\necho "schema engine not available" >&2\nexit 1\n');
      chmodSync(stub, 0o755);
      env.PRISMA_SCHEMA_ENGINE_BINARY = stub;
    }

    const cli = path.join(path.dirname(require.resolve('prisma/package.json', { paths: [REPO_ROOT] })), 'build', 'index.js');
    const res = spawnSync(process.execPath, [cli, 'generate', '--schema', schemaCopy, '--generator', GENERATOR_NAME], {
      cwd: tmp, // no prisma.config.ts here: the schema copy is the only input
      env,
      encoding: 'utf8',
      timeout: 120_000,
    });
    if (res.status !== 0 || !existsSync(out)) {
      throw new Error(
        `prisma generate (DMMF dump) failed with status ${res.status}${res.error ? ` (${res.error.message})` : ''}:\n` +
          `${res.stdout ?? ''}${res.stderr ?? ''}`,
      );
    }
    const datamodel = JSON.parse(readFileSync(out, 'utf8')) as DmmfDatamodel;
    if (!Array.isArray(datamodel.models) || !Array.isArray(datamodel.indexes)) {
      throw new Error('unexpected DMMF shape: datamodel.models / datamodel.indexes missing');
    }
    return datamodel;
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}
