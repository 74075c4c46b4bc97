import { DynamicModule, Module } from '@nestjs/common';
import {
  AttemptRepository,
  CaseRepository,
  Database,
  LedgerRepository,
  OutboxRepository,
  QuotaCounterRepository,
  ReconciliationRepository,
  ReservationHoldRepository,
} from '@gateway/db';
import { CoreModule, CoreOptions } from '@gateway/service-kit';
import { CasesController } from './http/cases.controller';
import { ExposureController } from './http/exposure.controller';
import { QuotaCountersController } from './http/quota-counters.controller';
import { InstanceCountersScheduler } from './schedulers/instance-counters.scheduler';
import { ReconcileInstanceCounters } from './usecases/reconcile-instance-counters/reconcile-instance-counters.usecase';
import { SWEEP_CONFIG, SweepConfig } from './reconciliation.config';
import { ReconciliationMetrics } from './reconciliation.metrics';
import { SweepScheduler } from './schedulers/sweep.scheduler';
import { ImportUsage } from './usecases/import-usage/import-usage.usecase';
import { ImportUsageExport } from './usecases/import-export/import-export.usecase';
import { UsageExportsController } from './http/usage-exports.controller';
import { ListCases } from './usecases/list-cases/list-cases.usecase';
import { QueryExposure } from './usecases/query-exposure/query-exposure.usecase';
import { ReleaseCase } from './usecases/release-case/release-case.usecase';
import { SweepReservations } from './usecases/sweep-reservations/sweep-reservations.usecase';

@Module({})
export class ReconciliationModule {
  static register(core: CoreOptions & { sweep: SweepConfig }): DynamicModule {
    return {
      module: ReconciliationModule,
      imports: [CoreModule.forService(core)],
      controllers: [CasesController, ExposureController, QuotaCountersController, UsageExportsController],
      providers: [
        { provide: SWEEP_CONFIG, useValue: core.sweep },
        { provide: ReconciliationRepository, useFactory: (db: Database) => new ReconciliationRepository(db), inject: [Database] },
        { provide: ReservationHoldRepository, useValue: new ReservationHoldRepository() },
        { provide: QuotaCounterRepository, useFactory: (db: Database) => new QuotaCounterRepository(db), inject: [Database] },
        { provide: AttemptRepository, useValue: new AttemptRepository() },
        { provide: LedgerRepository, useFactory: (outbox: OutboxRepository) => new LedgerRepository(outbox), inject: [OutboxRepository] },
        {
          provide: CaseRepository,
          useFactory: (db: Database, outbox: OutboxRepository) => new CaseRepository(db, outbox),
          inject: [Database, OutboxRepository],
        },
        ReconciliationMetrics,
        SweepReservations,
        ImportUsage,
        ImportUsageExport,
        ReleaseCase,
        ListCases,
        QueryExposure,
        SweepScheduler,
        ReconcileInstanceCounters,
        InstanceCountersScheduler,
      ],
    };
  }
}
