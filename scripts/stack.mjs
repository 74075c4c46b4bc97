#!/usr/bin/env node
// `npm start`: Kafka + Postgres (or KAFKA_BROKERS / DATABASE_URL), migrations, demo data, every
// service and the provider simulator under a supervisor (a crashed service is reported and
// restarted with backoff); prints the demo key and a curl line. Ctrl-C stops it all.
//
//   node scripts/stack.mjs start [--scale=N] (npm start; npm start -- --scale=2 or GATEWAY_SCALE=2: N instances
//                                            of admission, dispatch and settlement, docs/scaling.md)
//   node scripts/stack.mjs restart <service> (npm run restart -- <service>): restart one service (or instance,
//                                            e.g. dispatch-2) of a running stack
//   node scripts/stack.mjs service <service> (npm run service -- <service>): run one service in the foreground,
//                                            against DATABASE_URL and KAFKA_BROKERS (the production shape)
import fs from 'node:fs';
import path from 'node:path';
import { startKafka } from './kafka.mjs';
import { ensurePostgres } from './postgres.mjs';
import { ensurePrismaClient } from './prisma-generate.mjs';
import { spawn } from 'node:child_process';
import {
  contentKey,
  instancesOf,
  portOf,
  ROOT,
  runTs,
  scaleFrom,
  serviceBuild,
  serviceCommand,
  serviceExtraEnv,
  SERVICES,
  startServices,
} from './services.mjs';

const log = (msg) => console.log(`[stack] ${new Date().toISOString().slice(11, 19)} ${msg}`);
const LOG_DIR = path.join(ROOT, '.local', 'logs');

async function start() {
  if (!fs.existsSync(path.join(ROOT, 'node_modules'))) {
    console.error('Dependencies are not installed: run `npm ci` first (npm start installs nothing by surprise).');
    process.exit(1);
  }
  await ensurePrismaClient({ quiet: true });
  const scale = scaleFrom();
  const stops = [];
  const shutdown = async (code) => {
    log('stopping…');
    for (const stop of stops.reverse()) await stop().catch(() => undefined);
    process.exit(code);
  };
  process.on('SIGINT', () => void shutdown(0));
  process.on('SIGTERM', () => void shutdown(0));
  try {
    const pg = await ensurePostgres({ database: 'gateway', log });
    stops.push(pg.stop);
    const kafka = await startKafka({ log });
    stops.push(kafka.stop);
    const env = {
      ...process.env,
      DATABASE_URL: pg.url,
      KAFKA_BROKERS: kafka.brokers,
      GATEWAY_CONTENT_KEY: contentKey(),
      // the provider simulator listens on loopback, which upstream URLs may only use when allowlisted
      GATEWAY_UPSTREAM_ALLOWLIST: process.env.GATEWAY_UPSTREAM_ALLOWLIST ?? '127.0.0.1',
    };
    log('applying migrations');
    process.stdout.write(await runTs('libs/db/src/migrations/migrate.cli.ts', env));
    const simPort = portOf(SERVICES[0], env);
    env.PROVIDER_SIM_URL = env.PROVIDER_SIM_URL ?? `http://127.0.0.1:${simPort}`;
    log('seeding demo data');
    // The database the scripts chose themselves is a demo database; a DATABASE_URL passed in is
    // seeded only when it is marked already or GATEWAY_DEMO_DATABASE=1 says so.
    const seedEnv = { ...env, GATEWAY_DEMO_DATABASE: process.env.DATABASE_URL ? (process.env.GATEWAY_DEMO_DATABASE ?? '') : '1' };
    const seeded = JSON.parse((await runTs('libs/testing/src/seed-demo.cli.ts', seedEnv)).trim().split('\n').pop());
    wireRealProviders(env, seeded.real);
    const logDir = LOG_DIR;
    log(`starting services (logs in ${path.relative(ROOT, logDir)}/)`);
    const services = await startServices({ env, logDir, supervise: true, scale, withConsole: true, log, stops });
    const admission = `http://127.0.0.1:${portOf(SERVICES[1], env)}`;
    console.log(`
Gateway is up.
  admission       ${admission}   (OpenAPI: ${admission}/docs)${scaledNote(services.children)}
  policy          http://127.0.0.1:${portOf(SERVICES[2], env)}/docs
  settlement      http://127.0.0.1:${portOf(SERVICES[4], env)}/docs
  reconciliation  http://127.0.0.1:${portOf(SERVICES[5], env)}/docs
  provider-sim    ${env.PROVIDER_SIM_URL}
  console         http://127.0.0.1:${portOf(SERVICES[6], env)}/   (web console: sign in with the operator or approver token below)

Demo workload support-draft key:  ${seeded.supportDraftKey}
Demo workload eval-rerank key:    ${seeded.evalRerankKey}   (approved exception: up to 2 candidates, 7 days)
Operator token (operator,finance): ${seeded.operatorToken}
Approver token (approver):         ${seeded.approverToken}

Try:
  curl -s ${admission}/v1/chat/completions -H 'authorization: Bearer ${seeded.supportDraftKey}' \\
    -H 'content-type: application/json' \\
    -d '{"model":"approved-standard","messages":[{"role":"user","content":"Say hello"}]}' -D -

${realProvidersHowTo(seeded, env)}
A crashed service is restarted here with backoff; \`npm run restart -- <service>\` restarts one.
Ctrl-C stops everything this command started.`);
  } catch (err) {
    console.error(`[stack] failed: ${err.message}`);
    await shutdown(1);
  }
}

/** With --scale: every instance of the scaled services, by name, port and instance id. */
function scaledNote(children) {
  const extra = children.filter((c) => c.env.GATEWAY_INSTANCE_ID);
  if (extra.length === 0) return '';
  const rows = extra.map((c) => `    ${c.name.padEnd(14)} http://127.0.0.1:${c.port}   instance id ${c.env.GATEWAY_INSTANCE_ID}`);
  return `\n  instances (each admission port is a full entry point; put a load balancer in front, docs/scaling.md):\n${rows.join('\n')}`;
}

/**
 * The real-provider routes the seed added (OPENAI_API_KEY / GEMINI_API_KEY set): dispatch gets
 * each key under the credential name its route names (GATEWAY_CREDENTIAL_OPENAI from
 * OPENAI_API_KEY, unless set already) and the provider hosts join the upstream allowlist.
 */
function wireRealProviders(env, real) {
  for (const [name, source] of Object.entries(real.credentials)) {
    if (env[name] === undefined && process.env[source]) env[name] = process.env[source].trim();
  }
  if (real.hosts.length === 0) return;
  const hosts = env.GATEWAY_UPSTREAM_ALLOWLIST.split(/[\s,]+/).filter((h) => h !== '');
  env.GATEWAY_UPSTREAM_ALLOWLIST = [...new Set([...hosts, ...real.hosts])].join(',');
  log(`real providers: routes ${real.routes.map((r) => r.id).join(', ')} (unverified); allowlist ${env.GATEWAY_UPSTREAM_ALLOWLIST}`);
}

function realProvidersHowTo(seeded, env) {
  const real = seeded.real;
  if (real.routes.length === 0) {
    return 'Real providers: set OPENAI_API_KEY and/or GEMINI_API_KEY before npm start to add routes to them (README, "Use with real providers").\n';
  }
  const policy = `http://127.0.0.1:${portOf(SERVICES[2], env)}`;
  const admission = `http://127.0.0.1:${portOf(SERVICES[1], env)}`;
  const key = seeded.supportDraftKey;
  const verify = real.routes.map(
    (r) => `  curl -s -X POST ${policy}/routes/${r.id}/verify -H 'authorization: Bearer ${seeded.operatorToken}' \\
    -H 'content-type: application/json' -d '{"probe":true}'`,
  );
  const call = real.routes.map((r) =>
    r.provider === 'openai'
      ? `  curl -s ${admission}/v1/chat/completions -H 'authorization: Bearer ${key}' -H 'content-type: application/json' \\
    -d '{"model":"${r.id}","messages":[{"role":"user","content":"Say hello"}]}'`
      : `  curl -s ${admission}/v1beta/models/${r.id}:generateContent -H 'x-goog-api-key: ${key}' -H 'content-type: application/json' \\
    -d '{"contents":[{"parts":[{"text":"Say hello"}]}],"generationConfig":{"thinkingConfig":{"thinkingBudget":0}}}'`,
  );
  const names = Object.keys(real.credentials).map((n) => n.replace('GATEWAY_CREDENTIAL_', ''));
  return `Real providers: routes ${real.routes.map((r) => r.id).join(', ')} call the provider with your key, referenced by name
(credential_ref ${names.join(', ')}; dispatch has it as ${Object.keys(real.credentials).join(', ')}). They are UNVERIFIED, so
nothing is sent upstream until an operator verifies them; the probe makes one small real call per route (billed):
${verify.join('\n')}
then call them as workload support-draft:
${call.join('\n')}
`;
}

/** Asks the supervisor of a running `npm start` to restart one service (it stops; the supervisor starts it again). */
function restart(name) {
  const pidFile = path.join(LOG_DIR, `${name}.pid`);
  const known = SERVICES.flatMap((s) => instancesOf(s, process.env, 9)).some((i) => i.name === name);
  if (!known || !fs.existsSync(pidFile)) {
    console.error(`no running service "${name}" (known: ${SERVICES.map((s) => s.name).join(', ')}); is npm start running?`);
    process.exit(2);
  }
  const pid = Number(fs.readFileSync(pidFile, 'utf8'));
  process.kill(pid, 'SIGTERM');
  console.log(`[stack] sent SIGTERM to ${name} (pid ${pid}); the supervisor in npm start restarts it`);
}

/** One service in the foreground, the way an orchestrator runs it: one process, its env, its exit code. */
async function service(name) {
  const s = SERVICES.find((x) => x.name === name);
  if (!s) {
    console.error(`unknown service "${name}" (known: ${SERVICES.map((x) => x.name).join(', ')})`);
    process.exit(2);
  }
  if (!['provider-sim', 'console'].includes(s.name) && (!process.env.DATABASE_URL || !process.env.KAFKA_BROKERS)) {
    console.error('set DATABASE_URL and KAFKA_BROKERS (and GATEWAY_CONTENT_KEY for admission and dispatch) first');
    process.exit(2);
  }
  const cmd = serviceCommand(s, await serviceBuild());
  const extra = await serviceExtraEnv(s);
  const child = spawn(process.execPath, cmd.args, { cwd: ROOT, env: { ...process.env, ...extra, ...cmd.env }, stdio: 'inherit' });
  for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => child.kill(sig));
  child.on('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
}

const [command = 'start', arg] = process.argv.slice(2);
if (command === 'start') start();
else if (command === 'restart') restart(arg);
else if (command === 'service') void service(arg);
else {
  console.error('usage: node scripts/stack.mjs start | restart <service> | service <service>');
  process.exit(2);
}
