import { seedDemo } from './demo-seed';

/** node -r @swc-node/register libs/testing/src/seed-demo.cli.ts → one JSON line on stdout. */
seedDemo(
  process.env.DATABASE_URL ?? '',
  process.env.PROVIDER_SIM_URL ?? 'http://127.0.0.1:3010',
  process.env.GATEWAY_DEMO_KEY || undefined,
  {
    markDemoDatabase: process.env.GATEWAY_DEMO_DATABASE === '1',
  },
)
  .then((out) => {
    process.stdout.write(JSON.stringify(out) + '\n');
  })
  .catch((err) => {
    console.error(err);
    process.exit(1);
  });
