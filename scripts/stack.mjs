#!/usr/bin/env node
// `npm start`: Kafka + Postgres (or KAFKA_BROKERS / DATABASE_URL), migrations, demo data, every
// service and the provider simulator; prints the demo key and a curl line. Ctrl-C stops it all.
import fs from 'node:fs';
import path from 'node:path';
import { startKafka } from './kafka.mjs';
import { ensurePostgres } from './postgres.mjs';
import { ensurePrismaClient } from './prisma-generate.mjs';
import { contentKey, portOf, ROOT, runTs, SERVICES, startServices } from './services.mjs';

const log = (msg) => console.log(`[stack] ${msg}`);

async function main() {
  if (!fs.existsSync(path.join(ROOT, 'node_modules'))) {
    console.error('Dependencies are not installed: run `npm ci` first (npm start installs nothing by surprise).');
    process.exit(1);
  }
  await ensurePrismaClient({ quiet: true });
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
    };
    log('applying migrations');
    process.stdout.write(await runTs('libs/db/src/migrations/migrate.cli.ts', env));
    const simPort = portOf(SERVICES[0], env);
    env.PROVIDER_SIM_URL = env.PROVIDER_SIM_URL ?? `http://127.0.0.1:${simPort}`;
    log('seeding demo data');
    const seeded = JSON.parse((await runTs('libs/testing/src/seed-demo.cli.ts', env)).trim().split('\n').pop());
    const logDir = path.join(ROOT, '.local', 'logs');
    log(`starting services (logs in ${path.relative(ROOT, logDir)}/)`);
    const services = await startServices({ env, logDir });
    stops.push(services.stop);
    const admission = `http://127.0.0.1:${portOf(SERVICES[1], env)}`;
    console.log(`
Gateway is up.
  admission       ${admission}   (OpenAPI: ${admission}/docs)
  policy          http://127.0.0.1:${portOf(SERVICES[2], env)}/docs
  settlement      http://127.0.0.1:${portOf(SERVICES[4], env)}/docs
  reconciliation  http://127.0.0.1:${portOf(SERVICES[5], env)}/docs
  provider-sim    ${env.PROVIDER_SIM_URL}

Demo workload support-draft key:  ${seeded.supportDraftKey}
Demo workload eval-rerank key:    ${seeded.evalRerankKey}   (approved exception: up to 2 candidates, 7 days)
Operator token (operator,finance): ${seeded.operatorToken}
Approver token (approver):         ${seeded.approverToken}

Try:
  curl -s ${admission}/v1/chat/completions -H 'authorization: Bearer ${seeded.supportDraftKey}' \\
    -H 'content-type: application/json' \\
    -d '{"model":"approved-standard","messages":[{"role":"user","content":"Say hello"}]}' -D -

Ctrl-C stops everything this command started.`);
    for (const c of services.children) {
      c.child.on('exit', (code) => {
        if (code !== 0 && code !== null) log(`${c.service.name} exited with ${code}; see .local/logs/${c.service.name}.log`);
      });
    }
  } catch (err) {
    console.error(`[stack] failed: ${err.message}`);
    await shutdown(1);
  }
}

main();
