import { Injectable, OnApplicationShutdown } from '@nestjs/common';
import { dispatchCommandV1, DispatchCommandEnvelopeV1, replyAddressOf } from '@gateway/contracts';
import { ContentCipher, errorClass, PoisonMessageError } from '@gateway/messaging';
import { RunAttempt } from '../usecases/run-attempt/run-attempt.usecase';

/** Upstream calls run concurrently beyond Kafka's per-partition serial delivery, up to this many. */
const MAX_IN_FLIGHT = 512;

/**
 * A command's offset is committed once its single-use claim is durable (`accept` resolves then);
 * the upstream call runs on. Redelivery after a crash finds the claim and sends nothing twice.
 */
@Injectable()
export class DispatchCommandsIntake implements OnApplicationShutdown {
  private readonly inFlight = new Set<Promise<void>>();

  constructor(
    private readonly cipher: ContentCipher,
    private readonly runAttempt: RunAttempt,
  ) {}

  async accept(envelope: DispatchCommandEnvelopeV1): Promise<void> {
    let cmd;
    try {
      cmd = dispatchCommandV1.parse(this.cipher.decrypt(envelope.body, envelope.action_id));
    } catch (err) {
      // Never retried: it cannot decrypt later either. Parked; reconciliation voids the
      // reservation once the command's dispatch deadline has passed.
      throw new PoisonMessageError(`undecryptable or invalid dispatch command: ${errorClass(err)}`);
    }
    while (this.inFlight.size >= MAX_IN_FLIGHT) await Promise.race(this.inFlight);
    const { done } = await this.runAttempt.execute(cmd, replyAddressOf(envelope));
    this.inFlight.add(done);
    void done.finally(() => this.inFlight.delete(done));
  }

  /** Lets running attempts record their outcome before the process exits. */
  async onApplicationShutdown(): Promise<void> {
    await Promise.allSettled([...this.inFlight]);
  }
}
