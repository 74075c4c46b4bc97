// Starts the gateway's services as child processes (JavaScript compiled once by scripts/build.mjs)
// and waits for each /health. Used by `npm start` and by the e2e stage of `npm test`.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ensureBuilt, markInUse } from './build.mjs';
import { ensureConsoleBuilt } from './console-build.mjs';
import { startKafka } from './kafka.mjs';
import { ensurePostgres, recreateDatabase, withDatabase } from './postgres.mjs';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

export const SERVICES = [
  { name: 'provider-sim', entry: 'apps/provider-sim/src/main.ts', portEnv: 'PROVIDER_SIM_PORT', port: 3010 },
  { name: 'admission', entry: 'apps/admission/src/main.ts', portEnv: 'ADMISSION_PORT', port: 3000 },
  { name: 'policy', entry: 'apps/policy/src/main.ts', portEnv: 'POLICY_PORT', port: 3001 },
  { name: 'dispatch', entry: 'apps/dispatch/src/main.ts', portEnv: 'DISPATCH_PORT', port: 3002 },
  // V8's own heap sizing (no SERVICE_NODE_FLAGS): see serviceNodeFlags
  { name: 'settlement', entry: 'apps/settlement/src/main.ts', portEnv: 'SETTLEMENT_PORT', port: 3003, nodeFlags: [] },
  { name: 'reconciliation', entry: 'apps/reconciliation/src/main.ts', portEnv: 'RECONCILIATION_PORT', port: 3004 },
  // the web console (issue 13): static files + a proxy to policy, settlement and reconciliation
  { name: 'console', entry: 'apps/console/src/main.ts', portEnv: 'CONSOLE_PORT', port: 3005 },
];

/** What a service needs beyond the stack's environment: the console its built web app (scripts/console-build.mjs). */
export async function serviceExtraEnv(service, env = process.env, log = () => {}) {
  if (service.name !== 'console' || env.CONSOLE_STATIC_DIR) return {};
  return { CONSOLE_STATIC_DIR: await ensureConsoleBuilt({ log }) };
}

export function portOf(service, env = process.env) {
  return Number(env[service.portEnv] ?? service.port);
}

/**
 * How a service process is started: `node <build>/<entry>.js` from the compiled tree
 * (scripts/build.mjs; `build` is its directory), or, with GATEWAY_RUN_TS=1, the TypeScript through
 * @swc-node/register as before (the runtime hook costs ~75 MB of RSS per process and compiles at
 * every start; kept to compare and to debug without a build).
 */
export function serviceCommand(service, build, env = process.env) {
  const flags = serviceNodeFlags(env, service);
  if (env.GATEWAY_RUN_TS === '1' || !build) {
    return { args: [...flags, '-r', '@swc-node/register', service.entry], env: { SWC_NODE_PROJECT: path.join(ROOT, 'tsconfig.json') } };
  }
  return { args: [...flags, path.join(build, service.entry.replace(/\.ts$/, '.js'))], env: {} };
}

/**
 * V8 flags every service process starts with (GATEWAY_NODE_FLAGS replaces them; empty = none).
 * A young generation of 2 × 4 MB instead of 2 × 16 MB, and the old generation's next GC limit at
 * 1.5 × what survived the last one instead of V8's adaptive factor (up to 4× when GC is quick, so
 * a busy process ballooned): −17 to −35 MB at saturation, no CPU per answer measurable in the
 * bench. docs/decisions.md, "Memory", has the measurements and the flags that were rejected.
 * No memory reducer: 8–35 s after traffic stops, V8 ran one or two shrinking mark-compacts in
 * 50–110 incremental steps, each step a task that wakes the event loop; on the 2-core VMs that
 * cost each service ~0.16 s of CPU per quiet spell, to give back 3–6 MB of a 40–50 MB heap
 * (docs/decisions.md, "Idle: V8's memory reducer").
 * No concurrent marking: a major GC's marking ran on a helper thread, taking one of the box's two
 * cores for 30–40 ms at a time while every process on the request path waited for the other; at
 * 100 req/s the slowest answers came in runs behind those bursts. Marked on the main thread in
 * incremental steps instead, the same work is spread out: added p99 lower in four of four
 * interleaved pairs, saturation higher in four of four, CPU per answer unchanged
 * (docs/decisions.md, "The tail at 100 req/s: V8's concurrent marking").
 */
export const SERVICE_NODE_FLAGS = [
  '--max-semi-space-size=4',
  '--heap-growing-percent=50',
  '--no-memory-reducer',
  '--no-concurrent-marking',
];

/**
 * A service's V8 flags: GATEWAY_NODE_FLAGS when set, else the service's own (`nodeFlags` in
 * SERVICES), else SERVICE_NODE_FLAGS. Settlement keeps V8's defaults: it works in batches of up to
 * 500 events whose objects live through a transaction, and with the small young generation and
 * the tight old-generation limit it spent ~1.5–2× the CPU per settled event (bench:settlement,
 * 2026-12-03, compiled instance: 0.22–0.29 ms with the flags, 0.14–0.15 ms without).
 */
export function serviceNodeFlags(env = process.env, service = undefined) {
  const raw = env.GATEWAY_NODE_FLAGS;
  if (raw !== undefined) return raw.split(/\s+/).filter(Boolean);
  return service?.nodeFlags ?? SERVICE_NODE_FLAGS;
}

/** The compiled tree for the current sources (built now if missing), or null with GATEWAY_RUN_TS=1. */
export async function serviceBuild({ env = process.env, log = () => {} } = {}) {
  if (env.GATEWAY_RUN_TS === '1') return null;
  // Another checkout's compiled tree (its dist/services/<hash>): the "before" of a before/after
  // pair run by this checkout's bench, against the same seeded stack (bench/README.md, knobs).
  if (env.GATEWAY_SERVICES_FROM) return path.resolve(env.GATEWAY_SERVICES_FROM);
  return ensureBuilt({ log });
}

/** The services that may run as several instances (`scale`): their state is in Postgres and Kafka only. */
export const SCALABLE = ['admission', 'dispatch', 'settlement'];

/** Instance n (1-based) of a scaled service listens on the service's port + INSTANCE_PORT_STEP × (n − 1). */
export const INSTANCE_PORT_STEP = 100;

/**
 * The instances `startServices` runs of one service: one, or `scale` of a SCALABLE service. With
 * scale 1 nothing changes (log `<name>.log`, the environment's GATEWAY_INSTANCE_ID or the
 * service's `<name>-<pid>`). With scale > 1 instance n is named `<name>-<n>` (the first keeps
 * `<name>`, so its log, pid file and `npm run restart -- <name>` stay where they were), listens on
 * its own port, and has the stable instance id `[GATEWAY_INSTANCE_ID-]<name>-<n>`: the same after
 * a restart, so its per-instance token counters and claims keep one owner.
 */
export function instancesOf(service, env = process.env, scale = 1) {
  const base = portOf(service, env);
  const n = SCALABLE.includes(service.name) ? Math.max(1, Math.floor(scale)) : 1;
  if (n === 1) return [{ service, name: service.name, port: base, env: {} }];
  const prefix = env.GATEWAY_INSTANCE_ID ? `${env.GATEWAY_INSTANCE_ID}-` : '';
  return Array.from({ length: n }, (_, i) => {
    const port = base + INSTANCE_PORT_STEP * i;
    return {
      service,
      name: i === 0 ? service.name : `${service.name}-${i + 1}`,
      port,
      env: { GATEWAY_INSTANCE_ID: `${prefix}${service.name}-${i + 1}`, [service.portEnv]: String(port) },
    };
  });
}

/** GATEWAY_SCALE or `--scale=N`: how many instances of each SCALABLE service (default 1). */
export function scaleFrom(args = scriptArgs(), env = process.env) {
  const raw = args.scale ?? env.GATEWAY_SCALE ?? '1';
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1 || n > 9) throw new Error(`scale must be an integer from 1 to 9, not "${raw}"`);
  return n;
}

/**
 * Spawns every service with `env` (the console only `withConsole` or named in `only`; `scale` instances of each SCALABLE one: instancesOf);
 * stdout/stderr go to `<logDir>/<instance name>.log` (and, with `echo`, to ours). Resolves when
 * every /health answers 200.
 *
 * With `supervise`, a service that exits without being asked to (a crash, an OOM kill, `kill -9`,
 * or `npm run service -- restart <name>`) is reported with its exit code or signal and started
 * again after a backoff (1 s doubling to 30 s; reset after a minute of running); `exits` lists
 * each such exit, and whether the process had answered /health before it. Each child's pid
 * is kept in `<logDir>/<name>.pid` so a single service can be restarted from another shell.
 */
export async function startServices({
  env,
  logDir,
  echo = false,
  timeoutMs = 90_000,
  only,
  supervise = false,
  scale = 1,
  withConsole = false,
  log = () => {},
  stops,
}) {
  fs.mkdirSync(logDir, { recursive: true });
  const children = [];
  let stopping = false;
  // The web console runs where someone looks at it (npm start, the e2e stack): chaos, fuzz, the
  // simulated day and the benchmarks measure the gateway without it unless they name it in `only`.
  const list = SERVICES.filter((s) => (only ? only.includes(s.name) : s.name !== 'console' || withConsole))
    .filter((s) => fs.existsSync(path.join(ROOT, s.entry)))
    .flatMap((s) => instancesOf(s, env, scale));
  const build = await serviceBuild({ env, log });
  const extraEnv = new Map();
  for (const s of new Set(list.map((i) => i.service))) extraEnv.set(s.name, await serviceExtraEnv(s, env, log));
  // A supervised service restarts from this tree, so it must outlive the pruning of old builds.
  const inUse = build ? setInterval(() => markInUse(build), 3600_000).unref() : null;
  const spawnChild = (inst, entry) => {
    const s = inst.service;
    const out = fs.openSync(path.join(logDir, `${inst.name}.log`), 'a');
    const cmd = serviceCommand(s, build, env);
    const child = spawn(process.execPath, cmd.args, {
      cwd: ROOT,
      env: { ...env, ...extraEnv.get(s.name), ...inst.env, ...cmd.env },
      stdio: ['ignore', echo ? 'pipe' : out, echo ? 'pipe' : out],
    });
    if (echo) {
      child.stdout.on('data', (d) => {
        fs.writeSync(out, d);
        process.stdout.write(d);
      });
      child.stderr.on('data', (d) => {
        fs.writeSync(out, d);
        process.stderr.write(d);
      });
    }
    entry.child = child;
    entry.exited = null;
    entry.healthy = false;
    entry.startedAt = Date.now();
    fs.writeFileSync(path.join(logDir, `${inst.name}.pid`), `${child.pid}\n`);
    child.on('exit', (code, signal) => {
      fs.closeSync(out);
      entry.exited = { code, signal };
      if (stopping || !supervise || entry.paused) return;
      // whether the process had answered /health: an exit before is a start that failed, after it a running service that ended
      entry.exits.push({ code, signal, afterHealthy: entry.healthy, atMs: Date.now() });
      if (Date.now() - entry.startedAt > 60_000) entry.backoffMs = 1000;
      const delay = entry.backoffMs;
      entry.backoffMs = Math.min(entry.backoffMs * 2, 30_000);
      entry.restarts += 1;
      log(`${inst.name} exited (${signal ? `signal ${signal}` : `code ${code}`}); restart ${entry.restarts} in ${delay} ms`);
      entry.timer = setTimeout(() => {
        if (stopping) return;
        spawnChild(inst, entry);
        waitHealthy(entry, timeoutMs, logDir).then(
          () => log(`${inst.name} is healthy again (pid ${entry.child.pid})`),
          (err) => log(`${inst.name} did not come back healthy: ${err.message.split('\n')[0]}`),
        );
      }, delay);
    });
  };
  const launch = (inst) => {
    const entry = {
      ...inst,
      child: null,
      exited: null,
      healthy: false,
      exits: [],
      startedAt: 0,
      backoffMs: 1000,
      restarts: 0,
      timer: null,
      paused: false,
    };
    children.push(entry);
    spawnChild(inst, entry);
    return entry;
  };
  const stop = async () => {
    stopping = true;
    clearInterval(inUse);
    for (const c of children) clearTimeout(c.timer);
    for (const c of children) if (!c.exited) c.child.kill('SIGTERM');
    const deadline = Date.now() + 15_000;
    while (children.some((c) => !c.exited) && Date.now() < deadline) await sleep(100);
    for (const c of children) if (!c.exited) c.child.kill('SIGKILL');
    for (const c of children) fs.rmSync(path.join(logDir, `${c.name}.pid`), { force: true });
  };
  // Registered before the first child starts: a Ctrl-C while the services start up (before this
  // returns) must stop them too, not leave them running without their broker.
  stops?.push(stop);
  try {
    // One instance of each service first, the extra instances of a scaled stack once those are up:
    // nine Nest applications starting at once on two cores can take longer than the health timeout.
    const waves = [list.filter((i) => i.name === i.service.name), list.filter((i) => i.name !== i.service.name)];
    for (const wave of waves) await Promise.all(wave.map(launch).map((c) => waitHealthy(c, timeoutMs, logDir)));
  } catch (err) {
    await stop();
    throw err;
  }
  /** A service's first instance by its service name, any instance by its instance name (`dispatch-2`). */
  const byName = (name) => {
    const c = children.find((x) => x.name === name);
    if (!c) throw new Error(`no service ${name}`);
    return c;
  };
  /** Stops one service and keeps it down (the supervisor does not restart it) until startOne. */
  const stopOne = async (name) => {
    const c = byName(name);
    c.paused = true;
    clearTimeout(c.timer);
    if (!c.exited) c.child.kill('SIGTERM');
    const deadline = Date.now() + 15_000;
    while (!c.exited && Date.now() < deadline) await sleep(100);
    if (!c.exited) c.child.kill('SIGKILL');
    while (!c.exited) await sleep(50);
  };
  const startOne = async (name) => {
    const c = byName(name);
    c.paused = false;
    spawnChild(c, c);
    await waitHealthy(c, timeoutMs, logDir);
  };
  return { stop, stopOne, startOne, children, build };
}

async function waitHealthy(entry, timeoutMs, logDir) {
  const url = `http://127.0.0.1:${entry.port}/health`;
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (entry.exited) break;
    try {
      const res = await fetch(url);
      if (res.ok) {
        entry.healthyAfterMs = Date.now() - entry.startedAt;
        entry.healthy = true;
        return;
      }
    } catch {
      // not listening yet
    }
    await sleep(200);
  }
  const log = path.join(logDir, `${entry.name}.log`);
  const tail = fs.existsSync(log) ? fs.readFileSync(log, 'utf8').split('\n').slice(-30).join('\n') : '';
  throw new Error(
    `${entry.name} did not become healthy at ${url}${entry.exited ? ` (exited ${JSON.stringify(entry.exited)})` : ''}\n${tail}`,
  );
}

export function sleep(ms) {
  return new Promise((r) => setTimeout(r, ms));
}

/** A 32-byte AES key kept in .local so restarts of `npm start` can still read in-flight messages. */
export function contentKey(env = process.env) {
  if (env.GATEWAY_CONTENT_KEY) return env.GATEWAY_CONTENT_KEY;
  const file = path.join(ROOT, '.local', 'content.key');
  if (fs.existsSync(file)) return fs.readFileSync(file, 'utf8').trim();
  fs.mkdirSync(path.dirname(file), { recursive: true });
  const key = Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString('base64');
  fs.writeFileSync(file, key + '\n', { mode: 0o600 });
  return key;
}

/** Runs a TypeScript CLI of the repo and returns its stdout. */
export function runTs(entry, env) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['-r', '@swc-node/register', entry], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    child.on('exit', (code) => (code === 0 ? resolve(out) : reject(new Error(`${entry} exited ${code}\n${err}${out}`))));
  });
}

/** The port variables of a stack of its own (tests, chaos, fuzz): admission at `base`, policy +1 … reconciliation +4, console +5, provider-sim +10. */
export function stackPorts(base) {
  return {
    ADMISSION_PORT: String(base),
    POLICY_PORT: String(base + 1),
    DISPATCH_PORT: String(base + 2),
    SETTLEMENT_PORT: String(base + 3),
    RECONCILIATION_PORT: String(base + 4),
    CONSOLE_PORT: String(base + 5),
    PROVIDER_SIM_PORT: String(base + 10),
  };
}

/**
 * For a script that starts a stack of its own: runs `run(stops)`, then calls what it pushed on
 * `stops` in reverse order, also on Ctrl-C.
 */
export async function withStops(run) {
  const stops = [];
  const cleanup = async () => {
    for (const stop of stops.reverse()) await stop().catch(() => undefined);
  };
  process.on('SIGINT', () => void cleanup().then(() => process.exit(130)));
  try {
    return await run(stops);
  } finally {
    await cleanup();
  }
}

/**
 * An empty, migrated database `database`, a fresh broker on `kafkaPort` (data in
 * .local/kafka/<name>-<port>), an empty log folder .local/<name>-logs, and the services'
 * environment for ports from `portBase` plus `extraEnv`; the stops are pushed on `stops`.
 * `postgresUrl`: a server the caller runs (the database is made on it), else `ensurePostgres`'s.
 */
export async function startOwnInfra({ name, database, kafkaPort, portBase, extraEnv = {}, stops, log, postgresUrl }) {
  const pgServer = postgresUrl
    ? { url: withDatabase(postgresUrl, database), stop: async () => {} }
    : await ensurePostgres({ database, log });
  stops.push(pgServer.stop);
  await recreateDatabase(pgServer.url);
  const dataDir = path.join(ROOT, '.local', 'kafka', `${name}-${kafkaPort}`);
  const kafka = await startKafka({ port: kafkaPort, dataDir, fresh: true, log });
  const logDir = path.join(ROOT, '.local', `${name}-logs`);
  fs.rmSync(logDir, { recursive: true, force: true });
  const env = {
    ...process.env,
    DATABASE_URL: pgServer.url,
    KAFKA_BROKERS: kafka.brokers,
    GATEWAY_CONTENT_KEY: contentKey(),
    ...stackPorts(portBase),
    // The provider simulator runs on loopback, which the upstream allowlist refuses unless listed.
    GATEWAY_UPSTREAM_ALLOWLIST: process.env.GATEWAY_UPSTREAM_ALLOWLIST ?? '127.0.0.1',
    ...extraEnv,
  };
  delete env.GATEWAY_INSTANCE_ID;
  log('migrating');
  await runTs('libs/db/src/migrations/migrate.cli.ts', env);
  return { pgServer, kafka, dataDir, logDir, env };
}

/** `--name=value` and `--flag` (→ 'true') arguments of a script. */
export function scriptArgs(argv = process.argv.slice(2)) {
  return Object.fromEntries(
    argv
      .filter((a) => a.startsWith('--'))
      .map((a) => {
        const [k, v] = a.slice(2).split('=');
        return [k, v ?? 'true'];
      }),
  );
}

/**
 * The number `--name=N` gives in `args` (`scriptArgs`), else `fallback` (a number, or a string
 * from the environment, checked the same way). Anything but a finite number of at least `min`
 * (a word, `--name` alone, `1e999`, a negative) stops the script with a message naming the option,
 * instead of running with NaN or Infinity.
 */
export function numberArg(args, name, fallback, min = 0) {
  const raw = args[name] ?? fallback;
  const n = typeof raw === 'number' ? raw : String(raw).trim() === '' ? NaN : Number(raw);
  if (!Number.isFinite(n) || n < min) throw new Error(`--${name} must be a number of at least ${min}, got ${JSON.stringify(String(raw))}`);
  return n;
}

/** A `require` that loads the repo's TypeScript (workspace aliases included) through @swc-node/register. */
export function tsRequire() {
  const require = createRequire(import.meta.url);
  process.env.SWC_NODE_PROJECT = path.join(ROOT, 'tsconfig.json');
  require('@swc-node/register');
  return require;
}
