import { DynamicModule, INestApplication, Type } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { MicroserviceOptions } from '@nestjs/microservices';
import { DocumentBuilder, OpenAPIObject, SwaggerModule } from '@nestjs/swagger';
import type { NestExpressApplication } from '@nestjs/platform-express';
import { Logger as PinoNestLogger, PinoLogger } from 'nestjs-pino';
import type { Logger } from 'pino';
import { BusTransport } from '@gateway/messaging';
import { AuthFailureThrottle, authThrottleMiddleware } from './auth-throttle';
import { Clock, CLOCK } from './clock';
import { loadHttpInputConfig, ServiceConfig } from './config';
import { SERVICE_CONFIG } from './core.module';
import { GatewayExceptionFilter } from './errors';
import { inputGuard } from './input-guard';
import { requestLog } from './logger';
import { Metrics } from './metrics';
import { startCpuProfile } from './profiling';

export interface HttpServiceOptions {
  title: string;
  description: string;
  port: number;
  host: string;
  logger: Logger;
}

export interface RunningService {
  app: INestApplication;
  url: string;
  openapi: OpenAPIObject;
  close(): Promise<void>;
}

/**
 * Starts one HTTP service: the failed-authentication throttle and the input guard (our own strict
 * JSON parser, URL and header checks, the body limit), so hostile input gets a stable 4xx from
 * the registry before any handler runs; the exception filter, OpenAPI at /docs, and the Kafka
 * consumers through `BusTransport` (a hybrid app: HTTP + @nestjs/microservices).
 */
export async function startHttpService(module: Type<unknown> | DynamicModule, opts: HttpServiceOptions): Promise<RunningService> {
  const stopProfile = startCpuProfile(opts.title.replace(/\W+/g, '-'));
  const app = await NestFactory.create<NestExpressApplication>(module, { bodyParser: false, bufferLogs: true });
  // Express names itself on every answer (`X-Powered-By: Express`): a free hint to whoever probes
  // the gateway for known framework flaws. Nothing reads it.
  app.disable('x-powered-by');
  // Nest's own messages through pino, without nestjs-pino's LoggerModule (its request middleware
  // is replaced by `requestLog`, see there).
  app.useLogger(new PinoNestLogger(new PinoLogger({ pinoHttp: { logger: opts.logger } }), {}));
  const limits = app.get<ServiceConfig>(SERVICE_CONFIG).http ?? loadHttpInputConfig({});
  if (limits.trustProxy !== null) app.set('trust proxy', trustProxyValue(limits.trustProxy));
  const clock = app.get<Clock>(CLOCK);
  const metrics = app.get(Metrics);
  const throttle = new AuthFailureThrottle({ burst: limits.authFailureBurst, perMinute: limits.authFailuresPerMinute }, () =>
    clock.now().getTime(),
  );
  app.use(authThrottleMiddleware(throttle, () => metrics.unauthenticated.inc({ reason: 'rate_limited' })));
  app.use(...inputGuard({ bodyLimitBytes: limits.maxBodyBytes }));
  const filter = new GatewayExceptionFilter(opts.logger);
  app.use(filter.expressErrorHandler);
  // After the guard, where nestjs-pino's middleware ran: requests the guard refuses are not logged.
  app.use(requestLog(opts.logger));
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
  await listenWithBacklog(app, opts.port, opts.host, limits.listenBacklog);
  const address = app.getHttpServer().address() as { port: number };
  return {
    app,
    url: `http://${opts.host}:${address.port}`,
    openapi,
    close: () => app.close(),
  };
}

/**
 * Listens with the kernel's queue of connections not yet accepted bounded by `backlog`
 * (GATEWAY_LISTEN_BACKLOG). Nest's `listen` hands its arguments on to Node's
 * `server.listen(port, host, backlog, callback)`; its types leave the backlog out.
 */
export function listenWithBacklog(app: INestApplication, port: number, host: string, backlog: number): Promise<unknown> {
  const listen = app.listen.bind(app) as unknown as (port: number, host: string, backlog: number) => Promise<unknown>;
  return listen(port, host, backlog);
}

/** `GATEWAY_TRUST_PROXY`: a hop count, or what Express accepts as a list (`loopback`, addresses, subnets). */
function trustProxyValue(raw: string): number | string {
  return /^\d+$/.test(raw) ? Number(raw) : raw;
}

export function buildOpenApi(app: INestApplication, opts: { title: string; description: string }): OpenAPIObject {
  const config = new DocumentBuilder().setTitle(opts.title).setDescription(opts.description).setVersion('1').addBearerAuth().build();
  return SwaggerModule.createDocument(app, config);
}
