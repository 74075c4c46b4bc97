// Jest's node environment runs tests in a vm context whose globalThis lacks Node's undici global
// dispatcher (a Symbol-keyed global jest does not copy). @google/genai 2.x looks that symbol up on
// globalThis for every request and fails with "Undici globalDispatcher is not available" without it.
// This environment shares the real dispatcher with the sandbox. Use with
// `/** @jest-environment ./libs/testing/src/node-undici.environment.ts */`.
import type { EnvironmentContext, JestEnvironmentConfig } from '@jest/environment';
import { TestEnvironment } from 'jest-environment-node';

const DISPATCHER = Symbol.for('undici.globalDispatcher.1');

export default class NodeUndiciEnvironment extends TestEnvironment {
  constructor(config: JestEnvironmentConfig, context: EnvironmentContext) {
    super(config, context);
    new Headers(); // makes Node initialise undici (and its global dispatcher) lazily
    (this.global as Record<symbol, unknown>)[DISPATCHER] = (globalThis as Record<symbol, unknown>)[DISPATCHER];
  }
}
