// eslint-disable-next-line no-restricted-imports -- @nestjs/terminus reports an unhealthy check as Nest's own 503 exception
import { ServiceUnavailableException } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { TerminusModule } from '@nestjs/terminus';
import { Database } from '@gateway/db';
import { ConsumerStatus, KafkaBus } from '@gateway/messaging';
import { HEALTH_CHECK_TIMEOUT_MS, HealthController } from './health';

const consuming: ConsumerStatus = {
  groupId: 'gateway-dispatch',
  topic: 'gateway.dispatch.commands.v1',
  state: 'consuming',
  consuming: true,
  lastActivityAt: '2026-12-01T00:00:00.000Z',
  restarts: 0,
  lastError: null,
};

async function controller(consumers: ConsumerStatus[], ping: () => Promise<boolean> = async () => true): Promise<HealthController> {
  const module = await Test.createTestingModule({
    imports: [TerminusModule.forRoot({ logger: false })],
    controllers: [HealthController],
    providers: [
      { provide: Database, useValue: { ping } },
      { provide: KafkaBus, useValue: { healthy: async () => true, consumerStatus: () => consumers } },
    ],
  }).compile();
  return module.get(HealthController);
}

describe('HealthController', () => {
  it('is up when every consumer consumes', async () => {
    const res = await (await controller([consuming])).check();
    expect(res.status).toBe('ok');
    expect(res.info?.kafka_consumers).toMatchObject({ status: 'up' });
  });

  it('is down when a consumer crashed while the broker answers', async () => {
    const crashed = { ...consuming, state: 'restarting' as const, consuming: false, lastError: 'KafkaJSNonRetriableError' };
    const check = (await controller([consuming, crashed])).check();
    await expect(check).rejects.toBeInstanceOf(ServiceUnavailableException);
    const body = (await check.catch((e: ServiceUnavailableException) => e.getResponse())) as { error: Record<string, unknown> };
    expect(body.error.kafka_consumers).toMatchObject({
      status: 'down',
      consumers: [
        expect.objectContaining({ consuming: true }),
        expect.objectContaining({ state: 'restarting', last_error: 'KafkaJSNonRetriableError' }),
      ],
    });
  });

  it('is down, not hanging, when Postgres stops answering (a stalled server)', async () => {
    const health = await controller([consuming], () => new Promise<boolean>(() => undefined));
    jest.useFakeTimers();
    try {
      const check = health.check().catch((e: ServiceUnavailableException) => e);
      await jest.advanceTimersByTimeAsync(HEALTH_CHECK_TIMEOUT_MS);
      const answer = await check;
      expect(answer).toBeInstanceOf(ServiceUnavailableException);
      expect(((answer as ServiceUnavailableException).getResponse() as { error: Record<string, unknown> }).error.postgres).toEqual({
        status: 'down',
        message: `postgres did not answer within ${HEALTH_CHECK_TIMEOUT_MS} ms`,
      });
    } finally {
      jest.useRealTimers();
    }
  });
});
