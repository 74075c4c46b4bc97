import { ContentCipher } from '@gateway/messaging';
import { createLogger, loadConfig, portFromEnv, RunningService, startHttpService } from '@gateway/service-kit';
import { DispatchModule } from './dispatch.module';

/** Dispatch has no public API; its HTTP port serves /health, /metrics and /docs. */
export async function startDispatch(env: NodeJS.ProcessEnv = process.env): Promise<RunningService> {
  const config = loadConfig('dispatch', env);
  const logger = createLogger('dispatch', config.logLevel);
  return startHttpService(DispatchModule.register({ config, logger, cipher: ContentCipher.fromEnv(env) }), {
    title: 'LLM gateway: dispatch',
    description: 'Runs upstream attempts for admitted actions. Operational endpoints only.',
    port: portFromEnv('DISPATCH_PORT', 3002, env),
    host: config.host,
    logger,
  });
}
