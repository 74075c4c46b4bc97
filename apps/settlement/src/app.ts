import { createLogger, loadConfig, portFromEnv, RunningService, startHttpService } from '@gateway/service-kit';
import { SettlementModule } from './settlement.module';

export async function startSettlement(env: NodeJS.ProcessEnv = process.env): Promise<RunningService> {
  const config = loadConfig('settlement', env);
  const logger = createLogger('settlement', config.logLevel);
  return startHttpService(SettlementModule.register({ config, logger }), {
    title: 'LLM gateway: settlement',
    description: 'Prices attempts from provider-reported usage, writes the ledger, publishes gateway.usage.settled.v1.',
    port: portFromEnv('SETTLEMENT_PORT', 3003, env),
    host: config.host,
    logger,
  });
}
