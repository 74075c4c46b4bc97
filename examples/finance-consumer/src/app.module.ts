import { DynamicModule, Module } from '@nestjs/common';
import { FINANCE_CONFIG, FinanceConsumerConfig } from './config';
import { ExperimentFactsStore } from './experiment-facts.store';
import { ExperimentReportController } from './experiment-report.controller';
import { FinanceDb } from './finance-db';
import { SettledUsageConsumer } from './settled-usage.consumer';
import { SpendController } from './spend.controller';
import { SpendStore } from './spend.store';

@Module({})
export class FinanceConsumerModule {
  static forConfig(config: FinanceConsumerConfig): DynamicModule {
    return {
      module: FinanceConsumerModule,
      controllers: [SettledUsageConsumer, SpendController, ExperimentReportController],
      providers: [{ provide: FINANCE_CONFIG, useValue: config }, FinanceDb, SpendStore, ExperimentFactsStore],
    };
  }
}
