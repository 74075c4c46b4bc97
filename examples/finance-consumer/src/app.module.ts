import { DynamicModule, Module } from '@nestjs/common';
import { FINANCE_CONFIG, FinanceConsumerConfig } from './config';
import { SettledUsageConsumer } from './settled-usage.consumer';
import { SpendController } from './spend.controller';
import { SpendStore } from './spend.store';

@Module({})
export class FinanceConsumerModule {
  static forConfig(config: FinanceConsumerConfig): DynamicModule {
    return {
      module: FinanceConsumerModule,
      controllers: [SettledUsageConsumer, SpendController],
      providers: [{ provide: FINANCE_CONFIG, useValue: config }, SpendStore],
    };
  }
}
