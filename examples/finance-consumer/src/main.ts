/**
 * Finance consumer example: totals `gateway.usage.settled.v1` per workload and UTC day in its
 * own Postgres tables and serves them at `GET /spend?day=YYYY-MM-DD`. A plain NestJS app with
 * the standard Kafka transport; see README.md.
 */
import 'reflect-metadata';
import { NestFactory } from '@nestjs/core';
import { MicroserviceOptions, Transport } from '@nestjs/microservices';
import { FinanceConsumerModule } from './app.module';
import { configFromEnv } from './config';

async function bootstrap(): Promise<void> {
  // Nest's Kafka server also creates a producer (for request/reply, unused here); kafkajs warns
  // about its partitioner default on every start.
  process.env.KAFKAJS_NO_PARTITIONER_WARNING ??= '1';
  const config = configFromEnv();
  const app = await NestFactory.create(FinanceConsumerModule.forConfig(config));
  app.enableShutdownHooks();
  app.connectMicroservice<MicroserviceOptions>({
    transport: Transport.KAFKA,
    options: {
      client: { clientId: 'finance-consumer', brokers: config.brokers },
      consumer: { groupId: config.groupId },
      // A new group starts at the oldest message kept (the topic keeps 30 days); a known group
      // resumes from its committed offset.
      subscribe: { fromBeginning: true },
    },
  });
  // Create the tables (onModuleInit) before the first message can arrive.
  await app.init();
  await app.startAllMicroservices();
  await app.listen(config.port, config.host);
}

bootstrap().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
