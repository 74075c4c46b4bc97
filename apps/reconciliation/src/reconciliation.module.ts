import { DynamicModule, Module } from '@nestjs/common';
import {
  AttemptRepository,
  AuditRepository,
  CaseRepository,
  ControlsRepository,
  Database,
  LedgerRepository,
  OutboxRepository,
  QuotaCounterRepository,
  ReconciliationRepository,
  ReservationHoldRepository,
  UsageExportRepository,
} from '@gateway/db';
import { CoreModule, CoreOptions } from '@gateway/service-kit';
import { CasesController } from './http/cases.controller';
import { ExposureController } from './http/exposure.controller';
import { QuotaCountersController } from './http/quota-counters.controller';
import { InstanceCountersScheduler } from './schedulers/instance-counters.scheduler';
import { PruneProcessedEventsScheduler } from './schedulers/prune-processed-events.scheduler';
import { PruneProcessedEvents } from './usecases/prune-processed-events/prune-processed-events.usecase';
import { ReconcileInstanceCounters } from './usecases/reconcile-instance-counters/reconcile-instance-counters.usecase';
import {
  CONTROLS_CONFIG,
  ControlsConfig,
  EXPORT_COMPLETE_CONFIG,
  ExportCompleteConfig,
  SWEEP_CONFIG,
  SweepConfig,
} from './reconciliation.config';
import { CompleteUsageExport } from './usecases/complete-export/complete-export.usecase';
import { ControlsController } from './http/controls.controller';
import { AuditController } from './http/audit.controller';
import { UsageSettledConsumer } from './consumers/usage-settled.consumer';
import { RecordSettled } from './usecases/record-settled/record-settled.usecase';
import { RunAudit } from './usecases/run-audit/run-audit.usecase';
import { AdmissionDecisionsConsumer } from './consumers/admission-decisions.consumer';
import { DailyControlsScheduler } from './schedulers/daily-controls.scheduler';
import { RecordDecisions } from './usecases/record-decisions/record-decisions.usecase';
import { RunDailyControls } from './usecases/run-daily-controls/run-daily-controls.usecase';
import { ListControlAlerts } from './usecases/run-daily-controls/list-control-alerts.usecase';
import { ReconciliationMetrics } from './reconciliation.metrics';
import { SweepScheduler } from './schedulers/sweep.scheduler';
import { ImportUsage } from './usecases/import-usage/import-usage.usecase';
import { SettleLateEvidence } from './usecases/import-usage/settle-late-evidence.usecase';
import { ImportUsageExport } from './usecases/import-export/import-export.usecase';
import { UsageExportsController } from './http/usage-exports.controller';
import { ListCases } from './usecases/list-cases/list-cases.usecase';
import { QueryExposure } from './usecases/query-exposure/query-exposure.usecase';
import { ReleaseCase } from './usecases/release-case/release-case.usecase';
import { SweepReservations } from './usecases/sweep-reservations/sweep-reservations.usecase';

@Module({})
export class ReconciliationModule {
  static register(
    core: CoreOptions & { sweep: SweepConfig; controls?: ControlsConfig; exportComplete?: ExportCompleteConfig },
  ): DynamicModule {
    return {
      module: ReconciliationModule,
      imports: [CoreModule.forService(core)],
      controllers: [
        CasesController,
        ExposureController,
        QuotaCountersController,
        UsageExportsController,
        ControlsController,
        AuditController,
        AdmissionDecisionsConsumer,
        UsageSettledConsumer,
      ],
      providers: [
        { provide: SWEEP_CONFIG, useValue: core.sweep },
        { provide: CONTROLS_CONFIG, useValue: core.controls ?? { runIntervalMs: 0 } },
        { provide: EXPORT_COMPLETE_CONFIG, useValue: core.exportComplete ?? { graceMs: 600_000 } },
        { provide: UsageExportRepository, useFactory: (db: Database) => new UsageExportRepository(db), inject: [Database] },
        {
          provide: ControlsRepository,
          useFactory: (db: Database, outbox: OutboxRepository) => new ControlsRepository(db, outbox),
          inject: [Database, OutboxRepository],
        },
        { provide: AuditRepository, useFactory: (db: Database) => new AuditRepository(db), inject: [Database] },
        RecordDecisions,
        RecordSettled,
        RunAudit,
        RunDailyControls,
        ListControlAlerts,
        DailyControlsScheduler,
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
        SettleLateEvidence,
        ImportUsageExport,
        CompleteUsageExport,
        ReleaseCase,
        ListCases,
        QueryExposure,
        SweepScheduler,
        ReconcileInstanceCounters,
        InstanceCountersScheduler,
        PruneProcessedEvents,
        PruneProcessedEventsScheduler,
      ],
    };
  }
}
