import { ContentCipher } from '@gateway/messaging';
import { createLogger, loadConfig, portFromEnv, HttpServiceDefinition, RunningService, startHttpService } from '@gateway/service-kit';
import { AdmissionModule } from './admission.module';

/** Admission's root module and HTTP options for this environment (also what its OpenAPI document is built from). */
export function admissionHttpService(env: NodeJS.ProcessEnv = process.env): HttpServiceDefinition {
  const config = loadConfig('admission', env);
  const logger = createLogger('admission', config.logLevel);
  return {
    module: AdmissionModule.register({ config, logger, cipher: ContentCipher.fromEnv(env) }),
    options: {
      title: 'LLM gateway: admission API',
      description: 'OpenAI- and Gemini-compatible admission API with candidate-count policy, reservations and x-gateway-* headers.',
      port: portFromEnv('ADMISSION_PORT', 3000, env),
      host: config.host,
      logger,
    },
  };
}

/** Starts admission; used by main.ts and by in-process test stacks. */
export async function startAdmission(env: NodeJS.ProcessEnv = process.env): Promise<RunningService> {
  const { module, options } = admissionHttpService(env);
  return startHttpService(module, options);
}
