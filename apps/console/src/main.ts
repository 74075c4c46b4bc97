// The console (issue 13): CONSOLE_PORT (default 3005), CONSOLE_HOST (default 127.0.0.1),
// CONSOLE_STATIC_DIR (the built web app; scripts/console-build.mjs, which npm start and npm test
// run) and the services it proxies: CONSOLE_<SERVICE>_URL, else http://127.0.0.1:<SERVICE>_PORT.
import pino from 'pino';
import { createConsoleServer, PROXIED, Proxied } from './server';

const DEFAULT_PORTS: Record<Proxied, number> = { policy: 3001, settlement: 3003, reconciliation: 3004 };

function upstreams(env: NodeJS.ProcessEnv): Record<Proxied, string> {
  const out = {} as Record<Proxied, string>;
  for (const s of PROXIED) {
    const name = s.toUpperCase();
    out[s] = env[`CONSOLE_${name}_URL`] ?? `http://127.0.0.1:${env[`${name}_PORT`] ?? DEFAULT_PORTS[s]}`;
  }
  return out;
}

function main(): void {
  const logger = pino({ name: 'console' });
  const staticDir = process.env.CONSOLE_STATIC_DIR;
  if (!staticDir) throw new Error('set CONSOLE_STATIC_DIR to the built console (node scripts/console-build.mjs prints it)');
  const port = Number(process.env.CONSOLE_PORT ?? 3005);
  const host = process.env.CONSOLE_HOST ?? '127.0.0.1';
  const server = createConsoleServer({ staticDir, upstreams: upstreams(process.env) });
  server.listen(port, host, () => logger.info({ url: `http://${host}:${port}/`, staticDir }, 'console listening'));
  const shutdown = () => server.close(() => process.exit(0));
  process.once('SIGTERM', shutdown);
  process.once('SIGINT', shutdown);
}

try {
  main();
} catch (err) {
  console.error(err);
  process.exit(1);
}
