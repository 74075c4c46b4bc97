import { ContentCipher } from '@gateway/messaging';
import { createLogger, loadConfig, portFromEnv, RunningService, startHttpService } from '@gateway/service-kit';
import { AdmissionModule } from './admission.module';

/** Starts admission; used by main.ts and by in-process test stacks. */
export async function startAdmission(env: NodeJS.ProcessEnv = process.env): Promise<RunningService> {
  const config = loadConfig('admission', env);
  const logger = createLogger('admission', config.logLevel);
  return startHttpService(AdmissionModule.register({ config, logger, cipher: ContentCipher.fromEnv(env) }), {
    title: 'LLM gateway: admission API',
    description: 'OpenAI- and Gemini-compatible admission API with candidate-count policy, reservations and x-gateway-* headers.',
    port: portFromEnv('ADMISSION_PORT', 3000, env),
    host: config.host,
    logger,
  });
}
