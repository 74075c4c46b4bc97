import { Injectable, OnApplicationBootstrap } from '@nestjs/common';
import { KafkaBus } from '@gateway/messaging';
import { SettleAttempt } from '../usecases/settle-attempt/settle-attempt.usecase';

@Injectable()
export class AttemptCompletedConsumer implements OnApplicationBootstrap {
  constructor(
    private readonly bus: KafkaBus,
    private readonly settle: SettleAttempt,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    await this.bus.subscribe('attemptCompleted', { groupId: 'gateway-settlement', concurrency: 6 }, (e) =>
      this.settle.execute(e, new Date()).then(() => undefined),
    );
  }
}
