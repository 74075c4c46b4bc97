import { createLogger, loadConfig, portFromEnv, HttpServiceDefinition, RunningService, startHttpService } from '@gateway/service-kit';
import { ReconciliationModule } from './reconciliation.module';
import { controlsConfigFromEnv, exportCompleteConfigFromEnv, sweepConfigFromEnv } from './reconciliation.config';

/** Reconciliation's root module and HTTP options for this environment (also what its OpenAPI document is built from). */
export function reconciliationHttpService(env: NodeJS.ProcessEnv = process.env): HttpServiceDefinition {
  const config = loadConfig('reconciliation', env);
  const logger = createLogger('reconciliation', config.logLevel);
  return {
    module: ReconciliationModule.register({
      config,
      logger,
      sweep: sweepConfigFromEnv(env),
      controls: controlsConfigFromEnv(env),
      exportComplete: exportCompleteConfigFromEnv(env),
    }),
    options: {
      title: 'LLM gateway: reconciliation',
      description:
        'Finds what cannot settle by itself (undispatchable reservations, orphaned attempts, missing usage), imports provider usage evidence, ' +
        'operator release with reason, exposure per budget account (settled, unresolved and pending, never summed), and the daily controls with their alerts.',
      port: portFromEnv('RECONCILIATION_PORT', 3004, env),
      host: config.host,
      logger,
    },
  };
}

/** Starts reconciliation (HTTP API + sweeper); used by main.ts and by in-process test stacks. */
export async function startReconciliation(env: NodeJS.ProcessEnv = process.env): Promise<RunningService> {
  const { module, options } = reconciliationHttpService(env);
  return startHttpService(module, options);
}
