// Integration tests against the real Kafka broker and Postgres started by scripts/test.mjs.
module.exports = {
  ...require('./jest.preset'),
  displayName: 'integration',
  testMatch: ['<rootDir>/{apps,libs,examples}/**/*.int-spec.ts'],
  testTimeout: 60000,
  maxWorkers: 1,
};
