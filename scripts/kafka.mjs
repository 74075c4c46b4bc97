#!/usr/bin/env node
// Local single-node Kafka (KRaft) for development and tests, without Docker.
//
// The broker jars come from Maven Central through infra/kafka/pom.xml and are
// copied to .local/kafka/libs (git-ignored). The broker runs as a plain
// `java -cp '.local/kafka/libs/*' kafka.Kafka server.properties` child process.
//
//   import { startKafka } from './scripts/kafka.mjs';
//   const kafka = await startKafka({ port: 9092 });  // -> { brokers, stop() }
//
// CLI:
//   node scripts/kafka.mjs fetch          download the jars (no-op when present)
//   node scripts/kafka.mjs start [port]   start a broker that outlives this command
//   node scripts/kafka.mjs stop [port]    stop the broker started by `start`
//
// Environment: KAFKA_BROKERS (reuse an existing cluster when it answers),
// KAFKA_PORT (default port), JAVA_HOME (which java to run), KAFKA_MESSAGE_MAX_BYTES
// (the broker's message.max.bytes; the services derive their body limit from it).

import { spawn, spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import kafkajs from 'kafkajs';

const { Kafka, logLevel } = kafkajs;

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const POM = path.join(ROOT, 'infra/kafka/pom.xml');
const LOG4J_CONFIG = path.join(ROOT, 'infra/kafka/log4j2.properties');
const LOCAL = path.join(ROOT, '.local/kafka');
const LIBS = path.join(LOCAL, 'libs');
const MARKER = '.pom-sha256';
const READY_TIMEOUT_MS = 60_000;
const STOP_TIMEOUT_MS = 15_000;

// Kafka's default; the services read the same variable for their body limit (see serverProperties).
const MESSAGE_MAX_BYTES = Number(process.env.KAFKA_MESSAGE_MAX_BYTES ?? 1048588);

const JAVA = process.env.JAVA_HOME ? path.join(process.env.JAVA_HOME, 'bin/java') : 'java';

// Tuned for start-up time and idle cost, not throughput: C1 only (the broker does little
// work in tests, and C2 compilation would compete for our 2 cores), the serial collector (no
// concurrent GC threads waking up while the broker idles), thread pools sized for 2 cores
// whatever the host reports, the JDK's class data sharing archive, and no CDS chatter in the
// broker log.
export function brokerJvmFlags(env = process.env) {
  return [
    '-Xms256m',
    '-Xmx512m',
    '-XX:+UseSerialGC',
    '-XX:ActiveProcessorCount=2',
    '-XX:TieredStopAtLevel=1',
    '-Xshare:auto',
    '-Xlog:cds=off,cds+dynamic=off',
    // appended for a measurement (a GC log, another heap size); later flags win
    ...(env.KAFKA_EXTRA_JVM_FLAGS ?? '').split(/\s+/).filter(Boolean),
    '-Djava.awt.headless=true',
    `-Dlog4j2.configurationFile=${LOG4J_CONFIG}`,
  ];
}
const JVM_FLAGS = brokerJvmFlags();

const silent = () => {};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// ---------------------------------------------------------------- jars

/** Copies the broker's runtime classpath into .local/kafka/libs unless the jars for the current pom are already there. */
export async function ensureKafkaJars({ log = silent } = {}) {
  const hash = createHash('sha256').update(fs.readFileSync(POM)).digest('hex');
  const markerFile = path.join(LIBS, MARKER);
  const present = () => fs.existsSync(markerFile) && fs.readFileSync(markerFile, 'utf8').trim() === hash;
  if (present()) return LIBS;

  log(`fetching Kafka broker jars with Maven (${path.relative(ROOT, POM)})`);
  // Copy into a private folder and rename it into place, so that two
  // processes fetching at the same time never see a half-filled libs/.
  fs.mkdirSync(LOCAL, { recursive: true });
  const tmp = fs.mkdtempSync(path.join(LOCAL, 'libs-tmp-'));
  try {
    await run('mvn', ['-q', '-B', '-f', POM, 'dependency:copy-dependencies', `-DoutputDirectory=${tmp}`, '-DincludeScope=runtime']);
    fs.writeFileSync(path.join(tmp, MARKER), `${hash}\n`);
    // Another process may have finished first; its copy is just as good.
    if (!present()) {
      fs.rmSync(LIBS, { recursive: true, force: true });
      try {
        fs.renameSync(tmp, LIBS);
      } catch (err) {
        if (!present()) throw err;
      }
    }
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
  return LIBS;
}

function run(cmd, args) {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    child.on('error', (err) => reject(new Error(`could not run ${cmd} (${err.message}); is it installed and on PATH?`)));
    child.on('exit', (code) =>
      code === 0 ? resolve(out) : reject(new Error(`${cmd} ${args.join(' ')} exited with ${code}\n${out.slice(-4000)}`)),
    );
  });
}

// ---------------------------------------------------------------- broker

/**
 * Starts a single-node KRaft broker on 127.0.0.1:port (controller on port+1),
 * or reuses the cluster in KAFKA_BROKERS when it answers.
 *
 * Options: dataDir (default .local/kafka/data-<port>), log (progress messages),
 * fresh (wipe the data dir first), detach (leave the broker running when this
 * process exits; used by the CLI), scram (see scramListener below: a second,
 * SASL_PLAINTEXT listener that only SCRAM users can use; its users are created
 * when the data dir is formatted, so give it with `fresh` or a new dataDir), gcLog (the broker
 * logs its collections with wall-clock stamps to gcLogFile, next to its log; read them with
 * brokerGcPauses).
 * Returns { brokers, stop, pid, logFile, gcLogFile } plus saslBrokers when scram was given.
 */
export async function startKafka({
  port = Number(process.env.KAFKA_PORT ?? 9092),
  dataDir = path.join(LOCAL, `data-${port}`),
  log = silent,
  fresh = false,
  detach = false,
  scram = null,
  gcLog = false,
} = {}) {
  const noop = async () => {};

  if (process.env.KAFKA_BROKERS) {
    if (await answers(process.env.KAFKA_BROKERS, 5000)) {
      log(`reusing Kafka at ${process.env.KAFKA_BROKERS}`);
      return { brokers: process.env.KAFKA_BROKERS, stop: noop };
    }
    log(`nothing answers at KAFKA_BROKERS=${process.env.KAFKA_BROKERS}; starting a local broker`);
  }

  const brokers = `127.0.0.1:${port}`;
  const pidFile = path.join(dataDir, 'broker.pid');
  const logFile = path.join(LOCAL, `broker-${port}.log`);
  const gcLogFile = gcLog ? path.join(LOCAL, `broker-${port}-gc.log`) : null;

  // A broker from an earlier run may still be there.
  const previous = readPidFile(pidFile);
  if (previous && isKafkaProcess(previous.pid)) {
    // Started by `kafka.mjs start` (no owner) or by another live process,
    // which may still be starting it: share it once it answers.
    if (previous.owner == null || isAlive(previous.owner)) {
      const deadline = Date.now() + READY_TIMEOUT_MS;
      while (isAlive(previous.pid) && Date.now() < deadline) {
        if (await answers(brokers, 2000, { groupCoordinator: true })) {
          log(`reusing the broker already running at ${brokers} (pid ${previous.pid})`);
          return { brokers, stop: noop };
        }
        await sleep(200);
      }
    }
    // Its owner died without stopping it, or it hangs: it is stale.
    // SIGTERM first: a broker that shuts down cleanly deregisters, while a
    // killed one blocks the next start until its controller session expires.
    if (isAlive(previous.pid)) {
      log(`stopping stale broker pid ${previous.pid}`);
      finishCdsDump(previous.cdsDump, await killAndWait(previous.pid, 'SIGTERM', 5000));
    }
  }
  fs.rmSync(pidFile, { force: true });

  if (await portAnswers(port)) {
    if (await answers(brokers, 3000)) {
      log(`a Kafka broker not started by us already answers at ${brokers}; reusing it`);
      return { brokers, stop: noop };
    }
    throw new Error(`port ${port} on 127.0.0.1 is taken by something that is not Kafka`);
  }

  await ensureKafkaJars({ log });
  const cp = `${LIBS}/*`;

  if (fresh) fs.rmSync(dataDir, { recursive: true, force: true });
  const logsDir = path.join(dataDir, 'logs');
  fs.mkdirSync(logsDir, { recursive: true });
  const config = path.join(dataDir, 'server.properties');
  fs.writeFileSync(config, serverProperties({ port, logsDir }) + (scram ? scramListener({ brokerPort: port, saslPort: scram.port }) : ''));

  const cds = appCdsFlags();

  // Format once; later starts reuse the data (and skip a JVM start).
  if (!fs.existsSync(path.join(logsDir, 'meta.properties'))) {
    // Like `kafka-storage random-uuid`: 16 random bytes, URL-safe base64, and
    // never starting with '-', which the tool's argument parser would take for a flag.
    let clusterId;
    do clusterId = randomBytes(16).toString('base64url');
    while (clusterId.startsWith('-'));
    log(`formatting ${path.relative(ROOT, logsDir)} (cluster id ${clusterId})`);
    const res = spawnSync(
      JAVA,
      [
        ...JVM_FLAGS,
        ...cds.useFlags,
        '-cp',
        cp,
        'kafka.tools.StorageTool',
        'format',
        '--config',
        config,
        '--cluster-id',
        clusterId,
        ...(scram ? scramFormatArgs(scram.users) : []),
      ],
      { cwd: ROOT, encoding: 'utf8' },
    );
    if (res.status !== 0) {
      throw new Error(`kafka storage format failed (${res.error ?? `exit ${res.status}`}):\n${res.stdout}${res.stderr}`);
    }
  }

  const t0 = Date.now();
  const logFd = fs.openSync(logFile, 'w');
  if (gcLogFile) fs.rmSync(gcLogFile, { force: true });
  const gcFlags = gcLogFile ? [`-Xlog:gc:file=${gcLogFile}:utctime`] : [];
  const broker = spawn(JAVA, [...JVM_FLAGS, ...gcFlags, ...cds.flags, '-cp', cp, 'kafka.Kafka', config], {
    cwd: ROOT,
    // Own process group: a Ctrl-C in the terminal reaches only us, and we
    // decide how the broker goes down.
    detached: true,
    stdio: ['ignore', logFd, logFd],
  });
  fs.closeSync(logFd);
  let exited = null;
  const exitPromise = new Promise((resolve) => {
    broker.on('exit', (code, signal) => resolve((exited = { code, signal })));
    broker.on('error', (err) => resolve((exited = { code: null, signal: null, err })));
  });
  const pidInfo = { pid: broker.pid, owner: detach ? null : process.pid, port, cdsDump: cds.dump };
  fs.writeFileSync(pidFile, JSON.stringify(pidInfo));
  log(`broker pid ${broker.pid}, log ${path.relative(ROOT, logFile)}`);

  // Never keep this process alive just for the broker: a script that forgets
  // stop() still exits, and the exit hook below takes the broker down.
  broker.unref();
  const cleanup = detach ? () => {} : tieToThisProcess(broker.pid);

  let warmup = Promise.resolve();
  const stop = async () => {
    await warmup;
    cleanup();
    // The broker is unref'd so that it never keeps us alive, but a stop must wait for its exit: with
    // nothing else on the event loop Node would quit mid-await, with code 0 and the caller's work
    // after stop() (npm test's summary and failure exit code) never done.
    broker.ref();
    let killed = false;
    if (!exited) {
      safeKill(broker.pid, 'SIGTERM');
      const timer = setTimeout(() => {
        killed = true;
        safeKill(broker.pid, 'SIGKILL');
      }, STOP_TIMEOUT_MS);
      await exitPromise;
      clearTimeout(timer);
    }
    finishCdsDump(cds.dump, !killed);
    fs.rmSync(pidFile, { force: true });
  };

  // Ready when a real client can fetch cluster metadata.
  const deadline = Date.now() + READY_TIMEOUT_MS;
  for (;;) {
    if (exited) {
      await stop();
      throw new Error(
        `Kafka broker exited during start-up (${exited.err ?? `code ${exited.code}, signal ${exited.signal}`}). ` +
          `Tail of ${logFile}:\n${tail(logFile)}`,
      );
    }
    if ((await portAnswers(port)) && (await answers(brokers, 2000, { groupCoordinator: true }))) break;
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`Kafka broker did not become ready within ${READY_TIMEOUT_MS / 1000}s. Tail of ${logFile}:\n${tail(logFile)}`);
    }
    await sleep(100);
  }
  log(`Kafka ready at ${brokers} in ${Date.now() - t0} ms`);
  warmup = warmUpProducerIds(brokers);
  return { brokers, stop, pid: broker.pid, logFile, gcLogFile, ...(scram ? { saslBrokers: `127.0.0.1:${scram.port}` } : {}) };
}

/**
 * The SCRAM option: { port, users: [{ mechanism: 'SCRAM-SHA-256' | 'SCRAM-SHA-512', username, password }] }.
 * Adds a SASL_PLAINTEXT listener on 127.0.0.1:port accepting both SCRAM mechanisms; the
 * PLAINTEXT listener and the controller stay as they are. These lines come after
 * serverProperties()' and override its listener lines (in a properties file the last one wins).
 */
function scramListener({ brokerPort, saslPort }) {
  return `
# SCRAM listener (startKafka's scram option); overrides the listener lines above.
listeners=PLAINTEXT://127.0.0.1:${brokerPort},CONTROLLER://127.0.0.1:${brokerPort + 1},SASL_PLAINTEXT://127.0.0.1:${saslPort}
advertised.listeners=PLAINTEXT://127.0.0.1:${brokerPort},SASL_PLAINTEXT://127.0.0.1:${saslPort}
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT
sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512
listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
`;
}

/**
 * KRaft keeps SCRAM credentials in the metadata log: `kafka-storage format --add-scram` writes
 * them at format time (kafka-configs --alter could add them after start, over a listener).
 */
function scramFormatArgs(users) {
  return users.flatMap(({ mechanism, username, password }) => {
    if (!/^SCRAM-SHA-(256|512)$/.test(mechanism)) throw new Error(`unsupported SCRAM mechanism ${mechanism}`);
    if (/[\],="]/.test(username) || /[\],"]/.test(password)) throw new Error('SCRAM test users: no ] , = or " in names or passwords');
    return ['--add-scram', `${mechanism}=[name=${username},password=${password}]`];
  });
}

/**
 * A new broker hands out producer ids only after fetching a block of them
 * from its controller, and it does that on the first InitProducerId request,
 * which it answers with "The coordinator is loading". kafkajs then logs an
 * ERROR and sleeps ~300 ms before retrying, whatever its retry settings (the
 * idempotent producer's InitProducerId retrier ignores them). Take that hit
 * here, in the background, rather than in the first test that produces.
 */
async function warmUpProducerIds(brokers) {
  const kafka = new Kafka({ clientId: 'kafka-mjs-warmup', brokers: [brokers], logLevel: logLevel.NOTHING });
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  try {
    await producer.connect();
  } catch {
    // only an optimisation
  } finally {
    await producer.disconnect().catch(() => {});
  }
}

export function serverProperties({ port, logsDir }) {
  const controllerPort = port + 1;
  return `# Generated by scripts/kafka.mjs on each start; edits are overwritten.
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:${controllerPort}
listeners=PLAINTEXT://127.0.0.1:${port},CONTROLLER://127.0.0.1:${controllerPort}
advertised.listeners=PLAINTEXT://127.0.0.1:${port}
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
log.dirs=${logsDir}

# Topics are created explicitly by the code that owns them.
auto.create.topics.enable=false
num.partitions=1
default.replication.factor=1
min.insync.replicas=1

# Single node: every internal topic has one replica. One partition each also
# makes the first consumer group / producer id request much faster than the
# default 50 partitions.
offsets.topic.replication.factor=1
offsets.topic.num.partitions=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
share.coordinator.state.topic.num.partitions=1

# After an unclean stop (kill -9, crash) the restarted broker cannot register
# until the controller expires its previous session: 9 s by default.
broker.session.timeout.ms=4000
broker.heartbeat.interval.ms=1000

# The controller appends a no-op record to the metadata log this often (default 500 ms), and
# every append wakes the metadata publishers: with one node there is no follower to keep alive.
metadata.max.idle.interval.ms=5000

# No waiting for more members before the first rebalance; allow short
# session timeouts so tests notice a dead consumer quickly.
group.initial.rebalance.delay.ms=0
group.min.session.timeout.ms=1000

# The largest record batch the broker accepts. The services derive their request-body limit
# from the same value (KAFKA_MESSAGE_MAX_BYTES, libs/service-kit/src/config.ts): a body that
# fits the limit fits one encrypted dispatch command, so nothing is admitted and reserved that
# cannot be published. Change both together (the default is Kafka's own).
message.max.bytes=${MESSAGE_MAX_BYTES}

# Small, test-sized logs.
log.segment.bytes=1048576
log.retention.hours=24
num.recovery.threads.per.data.dir=1
num.network.threads=2
num.io.threads=4
background.threads=2

# The log cleaner (compaction of __consumer_offsets and the other compacted topics) allocates its
# dedupe map on the heap when the broker starts: 128 MiB by default, which was 143 of the heap's
# 155 MB and 124 MB of the idle broker's 310 MB RSS. 16 MiB maps ~600,000 keys per cleaning
# pass (24 bytes each at the 0.9 load factor), far more than a local broker's topics hold.
log.cleaner.dedupe.buffer.size=16777216
`;
}

/**
 * The broker's stop-the-world collections that ended between two wall-clock times (ms), from a
 * GC log written with `gcLog` (`-Xlog:gc` with `utctime`: a pause's line is stamped when it
 * ended): young and full collections, their pauses in ms, and the longest. Null without a log.
 */
export function brokerGcPauses(file, fromMs, toMs) {
  let text;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch {
    return null;
  }
  const out = { young: 0, full: 0, youngPauseMs: 0, fullPauseMs: 0, maxPauseMs: 0 };
  for (const line of text.split('\n')) {
    const m = /^\[([^\]]+)\] GC\(\d+\) Pause (Young|Full) .* ([\d.]+)ms$/.exec(line);
    const t = m ? Date.parse(m[1]) : NaN;
    if (!(t >= fromMs && t <= toMs)) continue;
    const ms = Number(m[3]);
    if (m[2] === 'Young') {
      out.young += 1;
      out.youngPauseMs += ms;
    } else {
      out.full += 1;
      out.fullPauseMs += ms;
    }
    out.maxPauseMs = Math.max(out.maxPauseMs, ms);
  }
  return out;
}

/**
 * True when a kafkajs admin client can connect to `brokers` and read cluster
 * metadata. With groupCoordinator, the group coordinator must answer too: on
 * a new broker that creates __consumer_offsets, on a restarted one it waits
 * for it to load, so the first consumer of a test does not hit (and log)
 * "The group coordinator is not available" / "is loading".
 */
async function answers(brokers, timeoutMs, { groupCoordinator = false } = {}) {
  const kafka = new Kafka({
    clientId: 'kafka-mjs-probe',
    brokers: brokers.split(',').map((b) => b.trim()),
    connectionTimeout: Math.min(timeoutMs, 1000),
    requestTimeout: timeoutMs,
    retry: { retries: 0 },
    logLevel: logLevel.NOTHING,
  });
  const admin = kafka.admin();
  try {
    await withTimeout(
      (async () => {
        await admin.connect();
        await admin.describeCluster();
        if (groupCoordinator) await admin.describeGroups(['kafka-mjs-probe']);
      })(),
      timeoutMs,
    );
    return true;
  } catch {
    return false;
  } finally {
    await admin.disconnect().catch(() => {});
  }
}

/** Cheap TCP probe, so we don't spin up a kafkajs client while the JVM is still booting. */
function portAnswers(port) {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port });
    const done = (ok) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(500, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

function withTimeout(promise, ms) {
  let timer;
  return Promise.race([
    promise.finally(() => clearTimeout(timer)),
    new Promise((_, reject) => (timer = setTimeout(() => reject(new Error('timeout')), ms))),
  ]);
}

// ---------------------------------------------------------------- class data sharing

// Loading and verifying ~6,000 classes is most of the broker's start-up. A
// dynamic AppCDS archive (JDK 13+) of the classes a previous run loaded
// roughly halves it (~1.5 s -> ~0.8 s here). The first run dumps the archive
// when the broker exits; later runs map it. The archive is only valid for the
// exact jars, JVM and JVM flags that made it, so its name carries a hash of them, and it
// lives in libs/ so that a re-fetch throws it away. JDK 19+ could do this by
// itself (-XX:+AutoCreateSharedArchive), but we run on 17.
function appCdsFlags() {
  const archive = path.join(LIBS, `kafka-${cdsKey()}.jsa`);
  if (fs.existsSync(archive)) {
    const use = [`-XX:SharedArchiveFile=${archive}`];
    return { flags: use, useFlags: use, dump: null };
  }
  // Dump to a private name and rename after a clean exit: a broker killed
  // mid-dump must not leave a truncated archive behind. Leftovers of such
  // runs are swept here.
  for (const f of fs.readdirSync(LIBS)) {
    const file = path.join(LIBS, f);
    if (f.endsWith('.tmp') && Date.now() - fs.statSync(file).mtimeMs > 3600_000) {
      fs.rmSync(file, { force: true });
    }
  }
  const dump = `${archive}.${process.pid}-${randomBytes(4).toString('hex')}.tmp`;
  return { flags: [`-XX:ArchiveClassesAtExit=${dump}`], useFlags: [], dump: { tmp: dump, archive } };
}

function finishCdsDump(dump, clean) {
  if (!dump) return;
  try {
    if (clean && fs.statSync(dump.tmp).size > 0) fs.renameSync(dump.tmp, dump.archive);
  } catch {
    // no archive this time; the next run tries again
  }
  fs.rmSync(dump.tmp, { force: true });
}

function cdsKey() {
  const java = resolveJava();
  const stat = fs.statSync(java);
  const jars = fs.readFileSync(path.join(LIBS, MARKER), 'utf8');
  // The JVM flags too: an archive dumped under another collector may not map.
  return createHash('sha256')
    .update(`${java}:${stat.size}:${stat.mtimeMs}:${jars}:${JVM_FLAGS.join(' ')}`)
    .digest('hex')
    .slice(0, 12);
}

/** Absolute, symlink-free path of the java binary we run. */
function resolveJava() {
  if (path.isAbsolute(JAVA)) return fs.realpathSync(JAVA);
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    const candidate = path.join(dir, JAVA);
    if (fs.existsSync(candidate)) return fs.realpathSync(candidate);
  }
  throw new Error('java not found on PATH (install a JDK 17+ or set JAVA_HOME)');
}

// ---------------------------------------------------------------- process hygiene

/**
 * Makes sure the broker goes down with this process, however it ends:
 * - normal exit / SIGINT / SIGTERM: handlers below send SIGTERM to the broker;
 * - SIGKILL or a crash (no handler runs): a tiny `sh` watchdog reads a pipe
 *   from us, sees EOF when we are gone, and terminates the broker.
 * Returns a function that undoes all of that (for a normal stop()).
 */
function tieToThisProcess(pid) {
  const watchdog = spawn(
    'sh',
    [
      '-c',
      // $1 = broker pid. SIGTERM, then SIGKILL if it is still alive after 15s.
      'read -r _; kill -TERM "$1" 2>/dev/null || exit 0; i=0; ' +
        'while kill -0 "$1" 2>/dev/null && [ $i -lt 150 ]; do sleep 0.1; i=$((i+1)); done; kill -KILL "$1" 2>/dev/null',
      'kafka-watchdog',
      String(pid),
    ],
    { detached: true, stdio: ['pipe', 'ignore', 'ignore'] },
  );
  watchdog.unref();
  watchdog.stdin.on('error', () => {}); // EPIPE if it died first; nothing to do
  watchdog.stdin.unref(); // the pipe must not keep this process alive

  const onExit = () => safeKill(pid, 'SIGTERM');
  const onSignal = (signal) => {
    safeKill(pid, 'SIGTERM');
    // Our listener replaced Node's default "die on signal"; restore it unless
    // the application has its own handler that will decide.
    if (process.listenerCount(signal) === 1) process.exit(signal === 'SIGINT' ? 130 : 143);
  };
  process.on('exit', onExit);
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);

  return () => {
    process.off('exit', onExit);
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    safeKill(watchdog.pid, 'SIGKILL');
  };
}

function safeKill(pid, signal) {
  try {
    process.kill(pid, signal);
  } catch {
    // already gone
  }
}

function isAlive(pid) {
  try {
    process.kill(pid, 0);
  } catch (err) {
    if (err.code !== 'EPERM') return false;
  }
  // A zombie (dead, not yet reaped by whoever adopted it) still has a pid.
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return process.platform !== 'linux';
  }
}

/** Guards against a recycled pid: only a live process running kafka.Kafka counts. */
function isKafkaProcess(pid) {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('kafka.Kafka');
  } catch {
    return isAlive(pid) && process.platform !== 'linux';
  }
}

/** Resolves true when the process exited after `signal`, false when it needed SIGKILL. */
async function killAndWait(pid, signal, timeoutMs) {
  safeKill(pid, signal);
  const deadline = Date.now() + timeoutMs;
  while (isAlive(pid) && Date.now() < deadline) await sleep(50);
  if (!isAlive(pid)) return true;
  safeKill(pid, 'SIGKILL');
  while (isAlive(pid)) await sleep(50);
  return false;
}

function readPidFile(file) {
  try {
    return JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch {
    return null;
  }
}

/** The broker's first errors (the cause is usually there, not at the end) and its last lines. */
function tail(file, lines = 25) {
  try {
    const all = fs.readFileSync(file, 'utf8').trimEnd().split('\n');
    const errors = all.filter((l) => /\] (ERROR|FATAL) |^Exception|^Error/.test(l)).slice(0, 10);
    const last = all.slice(-lines);
    return [...(errors.length ? ['--- first errors:', ...errors, '--- last lines:'] : []), ...last].join('\n');
  } catch {
    return '(no log)';
  }
}

// ---------------------------------------------------------------- CLI

async function main([command, portArg]) {
  const port = Number(portArg ?? process.env.KAFKA_PORT ?? 9092);
  const log = (msg) => console.error(`[kafka] ${msg}`);
  switch (command) {
    case 'fetch':
      await ensureKafkaJars({ log });
      log(`jars in ${path.relative(ROOT, LIBS)}`);
      break;
    case 'start': {
      const { brokers } = await startKafka({ port, log, detach: true });
      console.log(brokers);
      break;
    }
    case 'stop': {
      const pidFile = path.join(LOCAL, `data-${port}`, 'broker.pid');
      const info = readPidFile(pidFile);
      if (!info || !isKafkaProcess(info.pid)) {
        log(`no broker running for port ${port}`);
      } else {
        const clean = await killAndWait(info.pid, 'SIGTERM', STOP_TIMEOUT_MS);
        finishCdsDump(info.cdsDump, clean);
        log(`stopped broker pid ${info.pid}`);
      }
      fs.rmSync(pidFile, { force: true });
      break;
    }
    default:
      console.error('usage: node scripts/kafka.mjs start|stop|fetch [port]');
      process.exitCode = 2;
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main(process.argv.slice(2)).catch((err) => {
    console.error(err.message ?? err);
    process.exit(1);
  });
}
