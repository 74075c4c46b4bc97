// Small tests: pure logic and use cases against in-memory fakes. No network, no database.
module.exports = {
  ...require('./jest.preset'),
  displayName: 'unit',
  testMatch: ['<rootDir>/{apps,libs,examples,bench}/**/*.spec.ts'],
};
