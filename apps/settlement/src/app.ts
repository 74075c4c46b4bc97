import { createLogger, loadConfig, portFromEnv, HttpServiceDefinition, RunningService, startHttpService } from '@gateway/service-kit';
import { SettlementModule } from './settlement.module';

/** Settlement's root module and HTTP options for this environment (also what its OpenAPI document is built from). */
export function settlementHttpService(env: NodeJS.ProcessEnv = process.env): HttpServiceDefinition {
  const config = loadConfig('settlement', env);
  const logger = createLogger('settlement', config.logLevel);
  return {
    module: SettlementModule.register({ config, logger }),
    options: {
      title: 'LLM gateway: settlement',
      description: 'Prices attempts from provider-reported usage, writes the ledger, publishes gateway.usage.settled.v1.',
      port: portFromEnv('SETTLEMENT_PORT', 3003, env),
      host: config.host,
      logger,
    },
  };
}

export async function startSettlement(env: NodeJS.ProcessEnv = process.env): Promise<RunningService> {
  const { module, options } = settlementHttpService(env);
  return startHttpService(module, options);
}
