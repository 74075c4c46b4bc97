import { DynamicModule, INestApplication, Type } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { MicroserviceOptions } from '@nestjs/microservices';
import { DocumentBuilder, OpenAPIObject, SwaggerModule } from '@nestjs/swagger';
import express from 'express';
import { Logger as PinoNestLogger } from 'nestjs-pino';
import type { Logger } from 'pino';
import { BusTransport } from '@gateway/messaging';
import { GatewayExceptionFilter } from './errors';
import { startCpuProfile } from './profiling';

export interface HttpServiceOptions {
  title: string;
  description: string;
  port: number;
  host: string;
  logger: Logger;
  bodyLimit?: string;
}

export interface RunningService {
  app: INestApplication;
  url: string;
  openapi: OpenAPIObject;
  close(): Promise<void>;
}

/**
 * Starts one HTTP service: our own JSON parser (so malformed bodies get the stable
 * `invalid_request` error instead of a framework default), the exception filter, OpenAPI at /docs,
 * and the Kafka consumers through `BusTransport` (a hybrid app: HTTP + @nestjs/microservices).
 */
export async function startHttpService(module: Type<unknown> | DynamicModule, opts: HttpServiceOptions): Promise<RunningService> {
  const stopProfile = startCpuProfile(opts.title.replace(/\W+/g, '-'));
  const app = await NestFactory.create(module, { bodyParser: false, bufferLogs: true });
  app.useLogger(app.get(PinoNestLogger));
  app.use(express.json({ limit: opts.bodyLimit ?? '2mb', type: () => true }));
  const filter = new GatewayExceptionFilter(opts.logger);
  app.use(filter.expressErrorHandler);
  app.useGlobalFilters(filter);
  app.enableShutdownHooks();
  if (stopProfile) {
    const origClose = app.close.bind(app);
    app.close = async () => {
      await stopProfile();
      await origClose();
    };
    process.once('SIGTERM', () => void stopProfile());
  }
  const openapi = buildOpenApi(app, opts);
  SwaggerModule.setup('docs', app, openapi, { jsonDocumentUrl: 'docs/openapi.json' });
  // Consumers (the @EventPattern handlers) run on our Kafka transport. They must have joined and
  // fetched before the HTTP server listens: admission's reply consumer has to be subscribed before
  // any request can be answered. init() first, so lifecycle hooks run once, before any message.
  app.connectMicroservice<MicroserviceOptions>({ strategy: app.get(BusTransport) });
  await app.init();
  await app.startAllMicroservices();
  await app.listen(opts.port, opts.host);
  const address = app.getHttpServer().address() as { port: number };
  return {
    app,
    url: `http://${opts.host}:${address.port}`,
    openapi,
    close: () => app.close(),
  };
}

export function buildOpenApi(app: INestApplication, opts: { title: string; description: string }): OpenAPIObject {
  const config = new DocumentBuilder().setTitle(opts.title).setDescription(opts.description).setVersion('1').addBearerAuth().build();
  return SwaggerModule.createDocument(app, config);
}
