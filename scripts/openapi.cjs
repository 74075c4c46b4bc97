// The committed OpenAPI documents (docs/openapi/<service>.json) against what each service's Nest
// module describes, built without Postgres or Kafka (Nest preview mode, see openApiDocument in
// libs/service-kit/src/openapi.ts). CommonJS run through @swc-node/register so it can load the
// apps' TypeScript; it lives outside the Nx projects because no project may import an app.
//   node -r @swc-node/register scripts/openapi.cjs           exit 1 when a document is stale
//   node -r @swc-node/register scripts/openapi.cjs --write   rewrite them (npm run openapi)
require('reflect-metadata');
const fs = require('node:fs');
const path = require('node:path');

const ROOT = path.resolve(__dirname, '..');
/** Every HTTP service with a document; apps/<name>/src/app.ts exports `<name>HttpService(env)`. */
const SERVICES = ['admission', 'policy', 'dispatch', 'settlement', 'reconciliation'];

// Module construction reads these; preview mode never connects with them.
const env = {
  ...process.env,
  DATABASE_URL: 'postgresql://openapi.invalid/unused',
  GATEWAY_CONTENT_KEY: Buffer.alloc(32).toString('base64'),
  LOG_LEVEL: 'silent',
};

async function main() {
  const { openApiDocument } = require(path.join(ROOT, 'libs/service-kit/src/index.ts'));
  const write = process.argv.includes('--write');
  const dir = path.join(ROOT, 'docs', 'openapi');
  fs.mkdirSync(dir, { recursive: true });
  let stale = 0;
  for (const name of SERVICES) {
    const define = require(path.join(ROOT, 'apps', name, 'src', 'app.ts'))[`${name}HttpService`];
    if (typeof define !== 'function') throw new Error(`apps/${name}/src/app.ts does not export ${name}HttpService(env)`);
    const generated = JSON.stringify(await openApiDocument(define(env)), null, 2) + '\n';
    const file = path.join(dir, `${name}.json`);
    const committed = fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : '';
    if (committed === generated) continue;
    if (write) {
      fs.writeFileSync(file, generated);
      console.log(`[openapi] updated docs/openapi/${name}.json`);
    } else {
      stale++;
      console.error(`[openapi] docs/openapi/${name}.json is stale: run \`npm run openapi\` and commit it`);
    }
  }
  if (stale === 0) console.log(`[openapi] ${SERVICES.length} documents ${write ? 'written' : 'up to date'}`);
  return stale === 0 ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
