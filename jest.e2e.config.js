// End-to-end tests: the official openai and @google/genai SDKs against the whole running stack.
// E2E_STACK=shared runs the specs that use the stack scripts/test.mjs starts, E2E_STACK=own the
// ones that start a stack of their own (e2e/own-stack.json: scripts/test.mjs runs them beside
// the integration tier); unset, all of them. E2E_ONLY=<file> runs that one file.
const preset = require('./jest.preset');

const OWN_STACK = require('./e2e/own-stack.json');
const { E2E_ONLY, E2E_STACK } = process.env;
const files = E2E_ONLY ? [E2E_ONLY] : E2E_STACK === 'own' ? OWN_STACK : ['**/*.e2e-spec.ts'];

module.exports = {
  ...preset,
  displayName: 'e2e',
  testMatch: files.map((f) => `<rootDir>/e2e/${f}`),
  testPathIgnorePatterns: [...preset.testPathIgnorePatterns, ...(E2E_STACK === 'shared' ? OWN_STACK.map((f) => `/e2e/${f}$`) : [])],
  // @google/genai needs Node's undici global dispatcher inside jest's sandbox.
  testEnvironment: '<rootDir>/libs/testing/src/node-undici.environment.ts',
  testTimeout: 60000,
  maxWorkers: 1,
};
