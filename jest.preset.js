// Shared jest settings: SWC compiles TypeScript (with Nest decorator metadata), workspace
// packages resolve through npm workspaces to their TypeScript sources.
const fs = require('node:fs');
const path = require('node:path');
const swcrc = JSON.parse(fs.readFileSync(path.join(__dirname, '.swcrc'), 'utf8'));
delete swcrc.$schema;

module.exports = {
  rootDir: __dirname,
  testEnvironment: 'node',
  transform: { '^.+\\.(t|j|mj)s$': ['@swc/jest', { ...swcrc, swcrc: false }] },
  moduleFileExtensions: ['ts', 'js', 'mjs', 'json'],
  testPathIgnorePatterns: ['/node_modules/', '/dist/', '/.local/'],
  watchman: false,
};
