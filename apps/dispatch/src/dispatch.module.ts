import { DynamicModule, Module } from '@nestjs/common';
import { Database, DispatchRepository, ExperimentPauseRepository, HedgePolicyRepository, OutboxRepository } from '@gateway/db';
import { ContentCipher } from '@gateway/messaging';
import { upstreamAgent, UpstreamCredentials } from '@gateway/providers';
import { CoreModule, CoreOptions } from '@gateway/service-kit';
import { DispatchCommandsConsumer } from './consumers/dispatch-commands.consumer';
import { DispatchControlsConsumer } from './consumers/dispatch-controls.consumer';
import { DispatchCommandsIntake } from './consumers/dispatch-commands.intake';
import { DispatchMetrics } from './dispatch.metrics';
import { UPSTREAM, UPSTREAM_CREDENTIALS } from './tokens';
import { RelayStops } from './usecases/run-attempt/relay-stops';
import { RunAttempt } from './usecases/run-attempt/run-attempt.usecase';

@Module({})
export class DispatchModule {
  static register(
    core: CoreOptions & { cipher: ContentCipher; upstreamAllowlist: readonly string[]; credentials: UpstreamCredentials },
  ): DynamicModule {
    return {
      module: DispatchModule,
      imports: [CoreModule.forService(core)],
      controllers: [DispatchCommandsConsumer, DispatchControlsConsumer],
      providers: [
        { provide: ContentCipher, useValue: core.cipher },
        { provide: UPSTREAM_CREDENTIALS, useValue: core.credentials },
        {
          provide: UPSTREAM,
          useValue: upstreamAgent(core.upstreamAllowlist, { connections: 256, keepAliveTimeout: 30_000, pipelining: 1 }),
        },
        {
          provide: DispatchRepository,
          useFactory: (db: Database, outbox: OutboxRepository) => new DispatchRepository(db, outbox),
          inject: [Database, OutboxRepository],
        },
        {
          provide: HedgePolicyRepository,
          useFactory: (db: Database, outbox: OutboxRepository) => new HedgePolicyRepository(db, outbox),
          inject: [Database, OutboxRepository],
        },
        {
          provide: ExperimentPauseRepository,
          useFactory: (db: Database) => new ExperimentPauseRepository(db),
          inject: [Database],
        },
        { provide: RelayStops, useValue: new RelayStops() },
        DispatchMetrics,
        RunAttempt,
        DispatchCommandsIntake,
      ],
    };
  }
}
