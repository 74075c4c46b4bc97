import { seedDemo } from './demo-seed';
import { realRoutesFor, realRouteWiring } from './real-routes';

/**
 * node -r @swc-node/register libs/testing/src/seed-demo.cli.ts → one JSON line on stdout: the demo
 * keys and tokens, and `real` (routes to the real providers whose key variable is set, with the
 * names of the variables to wire; never a key: whether OPENAI_API_KEY / GEMINI_API_KEY is set is
 * all this reads of them).
 */
const realRoutes = realRoutesFor(process.env);
seedDemo(
  process.env.DATABASE_URL ?? '',
  process.env.PROVIDER_SIM_URL ?? 'http://127.0.0.1:3010',
  process.env.GATEWAY_DEMO_KEY || undefined,
  {
    markDemoDatabase: process.env.GATEWAY_DEMO_DATABASE === '1',
    realRoutes,
  },
)
  .then((out) => {
    const real = { routes: realRoutes.map((r) => ({ id: r.contract.routeId, provider: r.provider })), ...realRouteWiring(realRoutes) };
    process.stdout.write(JSON.stringify({ ...out, real }) + '\n');
  })
  .catch((err) => {
    console.error(err);
    process.exit(1);
  });
