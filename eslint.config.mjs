// Lint: typescript-eslint with type information, Nx module boundaries by project tags, and the
// house invariants (kafkajs only in libs/messaging, Prisma only in libs/db, topic names only in
// libs/contracts, no clock or randomness in libs/domain).
import nx from '@nx/eslint-plugin';
import tseslint from 'typescript-eslint';

const TOPIC_LITERAL = 'Literal[value=/^gateway\\.[a-z_.]+\\.v[0-9]+$/]';

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
        },
      ],
      'no-restricted-syntax': ['error', { selector: TOPIC_LITERAL, message: 'Topic names are declared once, in libs/contracts' }],
    },
  },
  {
    files: ['libs/messaging/**/*.ts', 'e2e/**/*.ts'],
    rules: { 'no-restricted-imports': ['error', { patterns: [{ group: ['@prisma/*'], message: 'Prisma lives in libs/db' }] }] },
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
        { selector: TOPIC_LITERAL, message: 'Topic names are declared once, in libs/contracts' },
        { selector: "NewExpression[callee.name='Date'][arguments.length=0]", message: 'libs/domain takes the clock as an argument' },
        {
          selector: "CallExpression[callee.object.name='Date'][callee.property.name='now']",
          message: 'libs/domain takes the clock as an argument',
        },
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
