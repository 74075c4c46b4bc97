import { DynamicModule, Global, Inject, Injectable, Module, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import { TerminusModule } from '@nestjs/terminus';
import type { Logger } from 'pino';
import { CatalogRepository, Database, OutboxRepository, PolicyRepository, ProcessedEventRepository } from '@gateway/db';
import { OperatorAuth } from './operator-auth';
import { BusTransport, KafkaBus, OutboxRelay } from '@gateway/messaging';
import { Counter } from 'prom-client';
import { ServiceConfig } from './config';
import { HealthController } from './health';
import { flushDropRecorder, Metrics, MetricsController } from './metrics';
import { classifyConsumerError } from './errors';
import { Clock, CLOCK, ENTROPY, ID_GENERATOR, IdGenerator, randomIds, systemClock, systemEntropy } from './clock';

export const SERVICE_CONFIG = 'SERVICE_CONFIG';
export const LOGGER = 'LOGGER';

export interface CoreOptions {
  config: ServiceConfig;
  logger: Logger;
}

@Injectable()
class CoreLifecycle implements OnApplicationBootstrap, OnApplicationShutdown {
  constructor(
    private readonly relay: OutboxRelay,
    private readonly bus: KafkaBus,
    private readonly db: Database,
    private readonly outbox: OutboxRepository,
  ) {}

  onApplicationBootstrap(): void {
    this.relay.start();
  }

  async onApplicationShutdown(): Promise<void> {
    await this.outbox.stop();
    await this.relay.stop();
    await this.bus.disconnect();
    await this.db.close();
  }
}

/**
 * Everything a gateway service shares: config, pino logging, Postgres, Kafka (topics ensured at
 * start-up), the outbox relay, idempotent-consumer store, /health and /metrics.
 */
@Global()
@Module({})
export class CoreModule {
  static forService({ config, logger }: CoreOptions): DynamicModule {
    const metrics = new Metrics(config.serviceName);
    const deadLetterCounter = new Counter({
      name: 'gateway_consumer_dead_lettered_total',
      help: 'Messages a consumer parked on the dead-letter topic, by source topic, consumer group and reason class',
      labelNames: ['topic', 'consumer', 'reason_class'],
      registers: [metrics.registry],
    });
    const quarantineCounter = new Counter({
      name: 'gateway_outbox_quarantined_total',
      help: 'Outbox rows set aside because they can never be published (too large, schema), by topic and reason',
      labelNames: ['topic', 'reason'],
      registers: [metrics.registry],
    });
    const sweptCounter = new Counter({
      name: 'gateway_outbox_swept_total',
      help: 'Outbox messages the periodic sweep published rather than the direct path after commit (a recovery; a duplicate when the direct send had gone out), by topic; a settled batch is one row and counts each of its events',
      labelNames: ['topic'],
      registers: [metrics.registry],
    });
    const flushDroppedCounter = new Counter({
      name: 'gateway_outbox_flush_dropped_total',
      help: 'Outbox rows of a commit made without waiting for the disk that the WAL flush gate gave up on (left to the sweep, or undone by a crash), by topic and reason: stopped, restarted, unreadable',
      labelNames: ['topic', 'reason'],
      registers: [metrics.registry],
    });
    return {
      module: CoreModule,
      imports: [TerminusModule.forRoot({ logger: false })],
      controllers: [HealthController, MetricsController],
      providers: [
        { provide: SERVICE_CONFIG, useValue: config },
        { provide: CLOCK, useValue: systemClock },
        { provide: ID_GENERATOR, useValue: randomIds },
        { provide: ENTROPY, useValue: systemEntropy },
        { provide: LOGGER, useValue: logger },
        { provide: Metrics, useValue: metrics },
        {
          provide: Database,
          useFactory: () =>
            new Database(config.databaseUrl, {
              poolMax: config.databasePoolMax,
              idleMs: config.databasePoolIdleMs,
              answerWithinMs: config.databaseAnswerTimeoutMs,
              idleInTransactionMs: config.databaseIdleInTransactionMs,
            }),
        },
        {
          provide: KafkaBus,
          useFactory: async (clock: Clock) => {
            const bus = new KafkaBus({
              brokers: config.kafkaBrokers,
              security: config.kafkaSecurity,
              clientId: config.instanceId,
              logger,
              now: () => clock.now(),
              deadLetterCounter,
              requestCounter: metrics.kafkaRequests,
              poison: { classify: classifyConsumerError },
            });
            await bus.connect();
            await bus.ensureTopics();
            return bus;
          },
          inject: [CLOCK],
        },
        // The @nestjs/microservices strategy bootstrap connects: every @EventPattern consumer.
        {
          provide: BusTransport,
          useFactory: (bus: KafkaBus, ids: IdGenerator) =>
            new BusTransport(bus, {
              instanceId: config.instanceId,
              instanceSuffix: () => `${config.instanceId}-${ids.next().slice(0, 8)}`,
            }),
          inject: [KafkaBus, ID_GENERATOR],
        },
        {
          provide: OutboxRepository,
          useFactory: (db: Database) => {
            const outbox = new OutboxRepository(db);
            outbox.onFlushDropped(flushDropRecorder(flushDroppedCounter, logger));
            return outbox;
          },
          inject: [Database],
        },
        { provide: ProcessedEventRepository, useFactory: (db: Database) => new ProcessedEventRepository(db), inject: [Database] },
        {
          provide: OutboxRelay,
          useFactory: (outbox: OutboxRepository, bus: KafkaBus) => {
            const relay = new OutboxRelay(outbox, bus, logger, {
              quarantineCounter,
              sweptCounter,
              sweepIdleMaxMs: config.outboxSweepIdleMaxMs,
            });
            // Publish right after each commit; the periodic sweep remains the delivery guarantee.
            outbox.onCommittedAppend((rows) => relay.publishCommitted(rows));
            return relay;
          },
          inject: [OutboxRepository, KafkaBus],
        },
        {
          provide: PolicyRepository,
          useFactory: (db: Database, outbox: OutboxRepository) => new PolicyRepository(db, outbox),
          inject: [Database, OutboxRepository],
        },
        { provide: CatalogRepository, useFactory: (db: Database) => new CatalogRepository(db), inject: [Database] },
        OperatorAuth,
        CoreLifecycle,
      ],
      exports: [
        CLOCK,
        ID_GENERATOR,
        ENTROPY,
        CatalogRepository,
        PolicyRepository,
        OperatorAuth,
        SERVICE_CONFIG,
        LOGGER,
        Metrics,
        Database,
        KafkaBus,
        BusTransport,
        OutboxRepository,
        ProcessedEventRepository,
        OutboxRelay,
      ],
    };
  }
}

export const InjectConfig = () => Inject(SERVICE_CONFIG);
export const InjectLogger = () => Inject(LOGGER);
