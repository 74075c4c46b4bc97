// End-to-end tests: the official openai and @google/genai SDKs against the whole running stack.
module.exports = {
  ...require('./jest.preset'),
  displayName: 'e2e',
  testMatch: [process.env.E2E_ONLY ? `<rootDir>/e2e/${process.env.E2E_ONLY}` : '<rootDir>/e2e/**/*.e2e-spec.ts'],
  // @google/genai needs Node's undici global dispatcher inside jest's sandbox.
  testEnvironment: '<rootDir>/libs/testing/src/node-undici.environment.ts',
  testTimeout: 60000,
  maxWorkers: 1,
};
