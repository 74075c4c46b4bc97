import { parseUpstreamAllowlist } from '@gateway/domain';
import { ContentCipher } from '@gateway/messaging';
import { createLogger, loadConfig, portFromEnv, HttpServiceDefinition, RunningService, startHttpService } from '@gateway/service-kit';
import { PolicyModule } from './policy.module';

/** Policy's root module and HTTP options for this environment (also what its OpenAPI document is built from). */
export function policyHttpService(env: NodeJS.ProcessEnv = process.env): HttpServiceDefinition {
  const config = loadConfig('policy', env);
  const logger = createLogger('policy', config.logLevel);
  return {
    module: PolicyModule.register({
      config,
      logger,
      probeTimeoutMs: msFromEnv('POLICY_PROBE_TIMEOUT_MS', 15_000, env),
      cipher: ContentCipher.fromEnv(env),
      upstreamAllowlist: parseUpstreamAllowlist(env.GATEWAY_UPSTREAM_ALLOWLIST),
      expirySweepMs: msFromEnv('POLICY_EXPIRY_SWEEP_MS', 60_000, env),
    }),
    options: {
      title: 'LLM gateway: policy',
      description:
        'Operator API: route contracts (versioned, verified), price revisions, workload policies and keys, time-boxed candidate exceptions with four-eyes approval. Money is integer micro-USD in strings.',
      port: portFromEnv('POLICY_PORT', 3001, env),
      host: config.host,
      logger,
    },
  };
}

/** Starts the policy service; used by main.ts and by in-process test stacks. */
export async function startPolicy(env: NodeJS.ProcessEnv = process.env): Promise<RunningService> {
  const { module, options } = policyHttpService(env);
  return startHttpService(module, options);
}

function msFromEnv(name: string, fallback: number, env: NodeJS.ProcessEnv): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 0) throw new Error(`${name} must be a non-negative integer of milliseconds, got ${raw}`);
  return n;
}
