import { DynamicModule, Type } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import type { OpenAPIObject } from '@nestjs/swagger';
import { buildOpenApi, HttpServiceOptions } from './bootstrap';

/** A service's root module and HTTP options, built from its environment: what it runs, and what its document is made from. */
export interface HttpServiceDefinition {
  module: Type<unknown> | DynamicModule;
  options: HttpServiceOptions;
}

/**
 * A service's OpenAPI document without running it: Nest's preview mode builds the module graph
 * but instantiates no provider, so nothing connects to Postgres or Kafka. The document is the
 * one `startHttpService` serves at /docs/openapi.json (same `buildOpenApi`).
 */
export async function openApiDocument({ module, options }: HttpServiceDefinition): Promise<OpenAPIObject> {
  const app = await NestFactory.create(module, { preview: true, abortOnError: false, logger: false });
  try {
    return buildOpenApi(app, options);
  } finally {
    await app.close();
  }
}
