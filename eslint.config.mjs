// Lint: typescript-eslint with type information, Nx module boundaries by project tags, and the
// house invariants (kafkajs only in libs/messaging, Prisma only in libs/db, topic names only in
// libs/contracts, no clock or randomness in libs/domain).
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import nx from '@nx/eslint-plugin';
import tseslint from 'typescript-eslint';

/**
 * @nx/enforce-module-boundaries reads Nx's cached project graph and, when there is none, prints a
 * warning and checks nothing (which --max-warnings does not count). Refuse to lint instead: the
 * graph must exist and know every project under apps/ and libs/ (`npm run lint` builds it first
 * with `nx show projects`).
 */
function assertProjectGraph() {
  const require = createRequire(import.meta.url);
  const projects = ['apps', 'libs', 'examples'].flatMap((dir) =>
    fs
      .readdirSync(path.join(import.meta.dirname, dir), { withFileTypes: true })
      .filter((d) => d.isDirectory() && fs.existsSync(path.join(import.meta.dirname, dir, d.name, 'project.json')))
      .map((d) => `${dir}/${d.name}`),
  );
  let roots;
  try {
    const graph = require('@nx/devkit').readCachedProjectGraph();
    const fileMap = require('nx/src/project-graph/nx-deps-cache').readFileMapCache()?.fileMap?.projectFileMap;
    if (!fileMap) throw new Error('no cached project file map');
    roots = new Set(Object.values(graph.nodes).map((n) => n.data.root));
  } catch (err) {
    throw new Error(
      `No Nx project graph, so the module-boundary rule would check nothing (${err.message}). Run \`npx nx show projects\` first (npm run lint does).`,
    );
  }
  const missing = projects.filter((p) => !roots.has(p));
  if (missing.length > 0) {
    throw new Error(
      `The Nx project graph is stale (it lacks ${missing.join(', ')}). Run \`npx nx show projects\` first (npm run lint does).`,
    );
  }
}
assertProjectGraph();

const TOPIC_LITERAL = 'Literal[value=/^gateway\\.[a-z_.]+\\.v[0-9]+$/]';
/** Nest's HTTP exceptions: errors are DomainErrors of the one registry, mapped by the one filter. */
const NEST_HTTP_EXCEPTIONS = [
  'HttpException',
  'BadRequestException',
  'UnauthorizedException',
  'ForbiddenException',
  'NotFoundException',
  'ConflictException',
  'PayloadTooLargeException',
  'UnprocessableEntityException',
  'InternalServerErrorException',
  'ServiceUnavailableException',
  'GatewayTimeoutException',
];
const TOPIC_RULE = { selector: TOPIC_LITERAL, message: 'Topic names are declared once, in libs/contracts' };

/** No wall clock or fresh ids where rules run: `Clock` / `IdGenerator` are injected (InjectClock(), InjectIds()). */
const injected = (why) => [
  { selector: "NewExpression[callee.name='Date'][arguments.length=0]", message: why },
  { selector: "CallExpression[callee.object.name='Date'][callee.property.name='now']", message: why },
];
const INJECTED_IDS = [
  { selector: "CallExpression[callee.name='randomUUID']", message: 'take ids from the injected IdGenerator (InjectIds())' },
  { selector: "CallExpression[callee.property.name='randomUUID']", message: 'take ids from the injected IdGenerator (InjectIds())' },
];

export default tseslint.config(
  { ignores: ['**/node_modules/**', '**/dist/**', '.local/**', '**/generated/**', '.nx/**', '**/*.cjs', '**/*.mjs', '**/*.js'] },
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts'],
    plugins: { '@nx': nx },
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/switch-exhaustiveness-check': ['error', { considerDefaultExhaustiveForUnions: true }],
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', destructuredArrayIgnorePattern: '^_' },
      ],
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-require-imports': 'off',
      '@nx/enforce-module-boundaries': [
        'error',
        {
          allow: [],
          enforceBuildableLibDependency: false,
          depConstraints: [
            {
              sourceTag: 'type:app',
              onlyDependOnLibsWithTags: ['type:domain', 'type:contracts', 'type:data-access', 'type:infra', 'type:testing'],
            },
            // An example outside the gateway (what a finance team copies): the published contracts only.
            { sourceTag: 'type:example', onlyDependOnLibsWithTags: ['type:contracts', 'type:domain'] },
            { sourceTag: 'type:domain', onlyDependOnLibsWithTags: ['type:domain'] },
            { sourceTag: 'type:contracts', onlyDependOnLibsWithTags: ['type:domain', 'type:contracts'] },
            { sourceTag: 'type:data-access', onlyDependOnLibsWithTags: ['type:domain', 'type:contracts', 'type:infra'] },
            { sourceTag: 'type:infra', onlyDependOnLibsWithTags: ['type:domain', 'type:contracts', 'type:data-access', 'type:infra'] },
            {
              sourceTag: 'type:testing',
              onlyDependOnLibsWithTags: ['type:domain', 'type:contracts', 'type:data-access', 'type:infra', 'type:testing', 'type:app'],
            },
          ],
        },
      ],
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            { group: ['kafkajs', '@prisma/*', '*/generated/prisma/*'], message: 'kafkajs lives in libs/messaging, Prisma in libs/db' },
          ],
          paths: [
            {
              name: '@nestjs/common',
              importNames: NEST_HTTP_EXCEPTIONS,
              message: 'throw DomainError (or a subclass) with a code of the registry in @gateway/domain; the one filter maps it to HTTP',
            },
          ],
        },
      ],
      'no-restricted-syntax': ['error', TOPIC_RULE],
    },
  },
  {
    // Use cases, controllers, consumers, schedulers and caches run under the injected clock and
    // id generator, so their specs can freeze time and fix ids.
    files: [
      'apps/*/src/**/{usecases,http,consumers,schedulers}/**/*.ts',
      'apps/*/src/**/*cache*.ts',
      'apps/policy/src/**/*.ts',
      'libs/service-kit/src/**/*.ts',
    ],
    ignores: [
      '**/*.spec.ts',
      // The one home of the system clock and UUIDs.
      'libs/service-kit/src/clock.ts',
    ],
    rules: {
      'no-restricted-syntax': ['error', TOPIC_RULE, ...injected('use the injected Clock (InjectClock())'), ...INJECTED_IDS],
    },
  },
  {
    files: ['libs/messaging/**/*.ts', 'e2e/**/*.ts'],
    rules: { 'no-restricted-imports': ['error', { patterns: [{ group: ['@prisma/*'], message: 'Prisma lives in libs/db' }] }] },
  },
  {
    // The finance consumer example is a plain NestJS app of another team, not a gateway service:
    // Nest's own HTTP exceptions, no gateway error registry (kafkajs still comes through Nest's transport).
    // It may use the published pure rules (@gateway/domain): its experiment report is computed by the
    // gateway's own `experimentReport`, one home for the statistics (issue 11).
    files: ['examples/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: ['kafkajs', '@prisma/*', '@gateway/*', '!@gateway/contracts', '!@gateway/domain'],
              message: 'the example uses only Nest, pg, zod, @gateway/contracts and @gateway/domain',
            },
          ],
        },
      ],
    },
  },
  {
    files: ['libs/db/**/*.ts'],
    rules: { 'no-restricted-imports': ['error', { patterns: [{ group: ['kafkajs'], message: 'kafkajs lives in libs/messaging' }] }] },
  },
  {
    files: ['libs/contracts/**/*.ts', 'e2e/**/*.ts', '**/*.spec.ts', '**/*.int-spec.ts'],
    rules: { 'no-restricted-syntax': 'off' },
  },
  {
    files: ['libs/domain/src/**/*.ts'],
    ignores: ['libs/domain/src/**/*.spec.ts'],
    rules: {
      'no-restricted-syntax': [
        'error',
        TOPIC_RULE,
        ...injected('libs/domain takes the clock as an argument'),
        {
          selector: "CallExpression[callee.object.name='Math'][callee.property.name='random']",
          message: 'libs/domain takes randomness as an argument',
        },
      ],
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: ['@nestjs/*', 'kafkajs', '@prisma/*', 'pg', 'undici', 'node:fs', 'node:http', 'node:net', 'pino', 'fs', 'http'],
              message: 'libs/domain is pure: no I/O, no framework',
            },
          ],
        },
      ],
    },
  },
);
