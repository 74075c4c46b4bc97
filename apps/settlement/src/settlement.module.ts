import { DynamicModule, Module } from '@nestjs/common';
import {
  AttemptRepository,
  CaseRepository,
  Database,
  LedgerQueryRepository,
  LedgerRepository,
  OutboxRepository,
  ReservationHoldRepository,
} from '@gateway/db';
import { CoreModule, CoreOptions } from '@gateway/service-kit';
import { AttemptCompletedConsumer } from './consumers/attempt-completed.consumer';
import { LedgerController } from './http/ledger.controller';
import { ExportLedger } from './usecases/export-ledger/export-ledger.usecase';
import { OpenPoisonCase } from './usecases/open-poison-case/open-poison-case.usecase';
import { QueryLedger } from './usecases/query-ledger/query-ledger.usecase';
import { SettleAttempt } from './usecases/settle-attempt/settle-attempt.usecase';

@Module({})
export class SettlementModule {
  static register(core: CoreOptions): DynamicModule {
    return {
      module: SettlementModule,
      imports: [CoreModule.forService(core)],
      controllers: [LedgerController, AttemptCompletedConsumer],
      providers: [
        { provide: ReservationHoldRepository, useValue: new ReservationHoldRepository() },
        { provide: AttemptRepository, useValue: new AttemptRepository() },
        { provide: LedgerRepository, useFactory: (outbox: OutboxRepository) => new LedgerRepository(outbox), inject: [OutboxRepository] },
        {
          provide: CaseRepository,
          useFactory: (db: Database, outbox: OutboxRepository) => new CaseRepository(db, outbox),
          inject: [Database, OutboxRepository],
        },
        { provide: LedgerQueryRepository, useFactory: (db: Database) => new LedgerQueryRepository(db), inject: [Database] },
        SettleAttempt,
        QueryLedger,
        ExportLedger,
        OpenPoisonCase,
      ],
    };
  }
}
