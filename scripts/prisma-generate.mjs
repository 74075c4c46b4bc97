#!/usr/bin/env node
// Generates the Prisma client (libs/db/src/generated/prisma) only when it is missing or stale, so
// `npm test` / `npm start` can call it on every run for the price of hashing a few files.
//
//   node scripts/prisma-generate.mjs            generate if stale (no-op when fresh)
//   node scripts/prisma-generate.mjs --force    always generate
//   node scripts/prisma-generate.mjs --check    exit 1 when the client is missing or stale, 0 when fresh
//
// Other scripts: `import { ensurePrismaClient } from './prisma-generate.mjs'`.
//
// Staleness = a SHA-256 over prisma/schema.prisma, prisma.config.ts and the installed prisma /
// @prisma/client versions, stored in libs/db/src/generated/.schema-hash after a successful run.
//
// The Prisma CLI insists on locating its schema engine binary before running any command, even
// though `generate` never uses it, and that binary cannot be downloaded here. When
// PRISMA_SCHEMA_ENGINE_BINARY is not set we point it at a stub that fails loudly if ever executed.
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const SCHEMA_FILE = path.join(ROOT, 'prisma', 'schema.prisma');
const CONFIG_FILE = path.join(ROOT, 'prisma.config.ts');
const GENERATED_ROOT = path.join(ROOT, 'libs', 'db', 'src', 'generated');
const CLIENT_DIR = path.join(GENERATED_ROOT, 'prisma');
const CLIENT_ENTRY = path.join(CLIENT_DIR, 'client.ts');
const HASH_FILE = path.join(GENERATED_ROOT, '.schema-hash');
const LOCK_FILE = path.join(GENERATED_ROOT, '.generate.lock');
const LOCK_STALE_MS = 5 * 60_000;
const LOCK_WAIT_MS = 3 * 60_000;

const requireFromRoot = createRequire(path.join(ROOT, 'package.json'));

function packageVersion(name) {
  try {
    return requireFromRoot(`${name}/package.json`).version;
  } catch {
    return 'not-installed';
  }
}

function readIfExists(file) {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch (err) {
    if (err && err.code === 'ENOENT') return null;
    throw err;
  }
}

/** The hash the generated client must carry to count as fresh. */
export function expectedHash() {
  const schema = readIfExists(SCHEMA_FILE);
  if (schema === null) throw new Error(`Prisma schema not found at ${SCHEMA_FILE}`);
  const h = createHash('sha256');
  h.update(
    JSON.stringify({
      schema,
      config: readIfExists(CONFIG_FILE) ?? '',
      prisma: packageVersion('prisma'),
      client: packageVersion('@prisma/client'),
    }),
  );
  return h.digest('hex');
}

/** @returns {{ fresh: boolean, reason: string }} */
export function clientStatus() {
  if (!fs.existsSync(CLIENT_DIR) || !fs.existsSync(CLIENT_ENTRY)) {
    return { fresh: false, reason: `generated client missing (${path.relative(ROOT, CLIENT_DIR)})` };
  }
  const stored = readIfExists(HASH_FILE)?.trim();
  if (!stored) return { fresh: false, reason: 'no schema hash stored beside the generated client' };
  if (stored !== expectedHash()) {
    return { fresh: false, reason: 'prisma/schema.prisma (or prisma config / version) changed since last generate' };
  }
  return { fresh: true, reason: 'up to date' };
}

/** A stand-in for Prisma's schema engine: `generate` only needs the file to exist. */
function dummySchemaEngine() {
  const file = path.join(os.tmpdir(), 'prisma-schema-engine-unavailable.sh');
  if (!fs.existsSync(file)) {
    const body =
      '#!/bin/sh\necho "Prisma schema engine is not available in this environment;' +
      ' use libs/db/src/migrations/migrate.ts for migrations." >&2\nexit 1\n';
    const tmp = `${file}.${process.pid}`;
    fs.writeFileSync(tmp, body, { mode: 0o755 });
    fs.renameSync(tmp, file);
  }
  return file;
}

function prismaCliPath() {
  return path.join(path.dirname(requireFromRoot.resolve('prisma/package.json')), 'build', 'index.js');
}

function runPrismaGenerate({ quiet }) {
  const env = { ...process.env, CHECKPOINT_DISABLE: '1', PRISMA_HIDE_UPDATE_MESSAGE: '1' };
  if (!env.PRISMA_SCHEMA_ENGINE_BINARY) env.PRISMA_SCHEMA_ENGINE_BINARY = dummySchemaEngine();
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [prismaCliPath(), 'generate'], {
      cwd: ROOT,
      env,
      stdio: quiet ? ['ignore', 'pipe', 'pipe'] : 'inherit',
    });
    let output = '';
    child.stdout?.on('data', (d) => (output += d));
    child.stderr?.on('data', (d) => (output += d));
    child.on('error', reject);
    child.on('exit', (code, signal) => {
      if (code === 0) resolve();
      else reject(new Error(`prisma generate failed (${signal ?? `exit code ${code}`})${output ? `:\n${output}` : ''}`));
    });
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Cross-process lock so parallel `npm test` / `npm start` do not generate into the same folder at once. */
async function withGenerateLock(fn) {
  fs.mkdirSync(GENERATED_ROOT, { recursive: true });
  const deadline = Date.now() + LOCK_WAIT_MS;
  for (;;) {
    try {
      fs.writeFileSync(LOCK_FILE, `${process.pid}\n`, { flag: 'wx' });
      break;
    } catch (err) {
      if (err.code !== 'EEXIST') throw err;
      let age = 0;
      try {
        age = Date.now() - fs.statSync(LOCK_FILE).mtimeMs;
      } catch {
        continue; // released between our attempts
      }
      if (age > LOCK_STALE_MS) {
        fs.rmSync(LOCK_FILE, { force: true });
        continue;
      }
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${LOCK_FILE}`);
      await sleep(200);
    }
  }
  try {
    return await fn();
  } finally {
    fs.rmSync(LOCK_FILE, { force: true });
  }
}

/**
 * Makes sure the generated Prisma client matches prisma/schema.prisma.
 * @param {{ force?: boolean, quiet?: boolean }} [options]
 * @returns {Promise<{ generated: boolean, reason: string }>}
 */
export async function ensurePrismaClient(options = {}) {
  const { force = false, quiet = false } = options;
  const before = clientStatus();
  if (before.fresh && !force) return { generated: false, reason: before.reason };

  return withGenerateLock(async () => {
    // Someone else may have generated while we waited for the lock.
    const now = clientStatus();
    if (now.fresh && !force) return { generated: false, reason: 'generated by a concurrent run' };
    const hash = expectedHash();
    fs.rmSync(HASH_FILE, { force: true });
    await runPrismaGenerate({ quiet });
    if (!fs.existsSync(CLIENT_ENTRY)) {
      throw new Error(`prisma generate succeeded but ${path.relative(ROOT, CLIENT_ENTRY)} does not exist`);
    }
    const tmp = `${HASH_FILE}.${process.pid}`;
    fs.writeFileSync(tmp, `${hash}\n`);
    fs.renameSync(tmp, HASH_FILE);
    return { generated: true, reason: force ? 'forced' : now.reason };
  });
}

async function main(argv) {
  const args = new Set(argv);
  for (const a of args) {
    if (!['--check', '--force', '--quiet'].includes(a)) {
      console.error(`unknown argument: ${a}\nusage: prisma-generate.mjs [--check | --force] [--quiet]`);
      return 2;
    }
  }
  if (args.has('--check')) {
    const status = clientStatus();
    if (status.fresh) {
      console.log('Prisma client is up to date.');
      return 0;
    }
    console.error(`Prisma client is stale: ${status.reason}. Run: node scripts/prisma-generate.mjs`);
    return 1;
  }
  const result = await ensurePrismaClient({ force: args.has('--force'), quiet: args.has('--quiet') });
  console.log(result.generated ? `Prisma client generated (${result.reason}).` : 'Prisma client is up to date.');
  return 0;
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  main(process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
    },
    (err) => {
      console.error(err instanceof Error ? err.message : err);
      process.exitCode = 1;
    },
  );
}
