import { DynamicModule, Module } from '@nestjs/common';
import { Database, LedgerQueryRepository, SettlementRepository } from '@gateway/db';
import { CoreModule, CoreOptions } from '@gateway/service-kit';
import { AttemptCompletedConsumer } from './consumers/attempt-completed.consumer';
import { LedgerController } from './http/ledger.controller';
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
        { provide: SettlementRepository, useValue: new SettlementRepository() },
        { provide: LedgerQueryRepository, useFactory: (db: Database) => new LedgerQueryRepository(db), inject: [Database] },
        SettleAttempt,
        QueryLedger,
        OpenPoisonCase,
      ],
    };
  }
}
