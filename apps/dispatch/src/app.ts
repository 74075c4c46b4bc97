import { parseUpstreamAllowlist } from '@gateway/domain';
import { ContentCipher } from '@gateway/messaging';
import { UpstreamCredentials } from '@gateway/providers';
import { createLogger, loadConfig, portFromEnv, HttpServiceDefinition, RunningService, startHttpService } from '@gateway/service-kit';
import { DispatchModule } from './dispatch.module';

/** Dispatch's root module and HTTP options for this environment (also what its OpenAPI document is built from). */
export function dispatchHttpService(env: NodeJS.ProcessEnv = process.env): HttpServiceDefinition {
  const config = loadConfig('dispatch', env);
  const logger = createLogger('dispatch', config.logLevel);
  return {
    module: DispatchModule.register({
      config,
      logger,
      cipher: ContentCipher.fromEnv(env),
      upstreamAllowlist: parseUpstreamAllowlist(env.GATEWAY_UPSTREAM_ALLOWLIST),
      // Problems with the secrets file are logged by kind, never with its content.
      credentials: UpstreamCredentials.fromEnvironment(env, (problem) =>
        logger.error({ file_problem: problem }, 'GATEWAY_CREDENTIALS_FILE cannot be used; keeping the keys read before'),
      ),
    }),
    options: {
      title: 'LLM gateway: dispatch',
      description: 'Runs upstream attempts for admitted actions. Operational endpoints only.',
      port: portFromEnv('DISPATCH_PORT', 3002, env),
      host: config.host,
      logger,
    },
  };
}

/** Dispatch has no public API; its HTTP port serves /health, /metrics and /docs. */
export async function startDispatch(env: NodeJS.ProcessEnv = process.env): Promise<RunningService> {
  const { module, options } = dispatchHttpService(env);
  return startHttpService(module, options);
}
