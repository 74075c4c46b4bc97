// CLI: PROVIDER_SIM_PORT (default 3010), PROVIDER_SIM_HOST (default 127.0.0.1), PROVIDER_SIM_SEED (default 1).
import pino from 'pino';
import { startProviderSim } from './index';

async function main(): Promise<void> {
  const logger = pino({ name: 'provider-sim' });
  const port = Number(process.env.PROVIDER_SIM_PORT ?? 3010);
  const host = process.env.PROVIDER_SIM_HOST ?? '127.0.0.1';
  const seed = Number(process.env.PROVIDER_SIM_SEED ?? 1);
  const sim = await startProviderSim({ port, host, seed });
  logger.info({ url: sim.url, port: sim.port, seed }, 'provider-sim listening');

  let closing = false;
  const shutdown = (signal: NodeJS.Signals) => {
    if (closing) return;
    closing = true;
    sim.close().then(
      () => process.exit(0),
      (err: unknown) => {
        logger.error({ err, signal }, 'provider-sim shutdown failed');
        process.exit(1);
      },
    );
  };
  process.once('SIGTERM', shutdown);
  process.once('SIGINT', shutdown);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
