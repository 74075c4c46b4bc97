/**
 * Issue 8 item 10: `KafkaBus` against a broker whose listener requires SASL/SCRAM. A broker of
 * its own (scripts/kafka.mjs `startKafka` with the `scram` option: a SASL_PLAINTEXT listener,
 * users created at format time), so the shared plaintext broker stays as it is. The bus is built
 * from the environment the way every service builds it (`loadConfig`).
 */
import { randomBytes, randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { KafkaBus, KafkaSecurity } from '@gateway/messaging';
import { loadConfig } from '@gateway/service-kit';
import { eventually, policyChangedEvent } from '@gateway/testing';
import { freeBrokerPort, OwnBroker, startOwnBroker } from './kafka-broker';

const DATA_DIR = path.resolve(__dirname, `../../../.local/kafka/scram-${process.pid}-${randomUUID().slice(0, 8)}`);
const quiet = { info: () => undefined, warn: () => undefined, error: () => undefined };
const users = {
  sha256: { mechanism: 'SCRAM-SHA-256' as const, username: 'gateway-256', password: randomBytes(12).toString('hex') },
  sha512: { mechanism: 'SCRAM-SHA-512' as const, username: 'gateway-512', password: randomBytes(12).toString('hex') },
};

describe('KafkaBus with SASL/SCRAM', () => {
  let broker: OwnBroker | undefined;
  const buses: KafkaBus[] = [];

  beforeAll(async () => {
    const port = await freeBrokerPort(Number(process.env.KAFKA_PORT ?? 9092) + 300);
    const saslPort = await freeBrokerPort(port + 2);
    broker = await startOwnBroker({ port, dataDir: DATA_DIR, fresh: true, scram: { port: saslPort, users: Object.values(users) } });
    fs.mkdirSync(DATA_DIR, { recursive: true });
  }, 90_000);

  afterAll(async () => {
    await Promise.allSettled(buses.map((b) => b.disconnect()));
    await broker?.stop();
    fs.rmSync(DATA_DIR, { recursive: true, force: true });
  });

  /** A bus configured from the environment, as a service would be. */
  function busFromEnv(env: Record<string, string>): { bus: KafkaBus; security: KafkaSecurity | undefined } {
    const config = loadConfig('scram-int', { DATABASE_URL: 'postgresql://unused', KAFKA_BROKERS: broker!.saslBrokers!, ...env });
    const bus = new KafkaBus({
      brokers: config.kafkaBrokers,
      clientId: `scram-${randomUUID().slice(0, 6)}`,
      logger: quiet,
      security: config.kafkaSecurity,
      retry: { initialRetryTime: 100, retries: 2, maxRetryTime: 500 },
    });
    buses.push(bus);
    return { bus, security: config.kafkaSecurity };
  }

  it.each([
    ['scram-sha-256', 'password', users.sha256],
    ['scram-sha-512', 'password file', users.sha512],
  ])('with the right credentials (%s, %s) a bus publishes and consumes', async (mechanism, source, user) => {
    const secret = path.join(DATA_DIR, `${user.username}.password`);
    fs.writeFileSync(secret, `${user.password}\n`, { mode: 0o600 });
    const { bus, security } = busFromEnv({
      KAFKA_SASL_MECHANISM: mechanism.toUpperCase(),
      KAFKA_SASL_USERNAME: user.username,
      ...(source === 'password' ? { KAFKA_SASL_PASSWORD: user.password } : { KAFKA_SASL_PASSWORD_FILE: secret }),
    });
    // The parsed config never serialises the password (logs, dumps).
    expect(security?.sasl?.password).toBe(user.password);
    expect(JSON.stringify(security)).not.toContain(user.password);

    await bus.connect();
    await bus.ensureTopics();
    const seen: string[] = [];
    await bus.subscribe('policyChanged', { groupId: `scram-${randomUUID()}`, fromBeginning: true }, async (e) => {
      seen.push(e.entity_id);
    });
    const id = `scram-${randomUUID()}`;
    // A new broker may still be settling its partition leaders: publish until it takes it.
    await eventually(() =>
      bus.publish('policyChanged', [{ key: id, value: policyChangedEvent(id, 'scram') }]).then(
        () => true,
        () => undefined,
      ),
    );
    await eventually(() => seen.find((e) => e === id));
  });

  it('with a wrong password the broker refuses the bus, and the error does not carry the password', async () => {
    const wrong = `wrong-${randomBytes(8).toString('hex')}`;
    const { bus } = busFromEnv({
      KAFKA_SASL_MECHANISM: 'scram-sha-256',
      KAFKA_SASL_USERNAME: users.sha256.username,
      KAFKA_SASL_PASSWORD: wrong,
    });
    const err = await bus.connect().then(
      () => undefined,
      (e: Error) => e,
    );
    expect(err).toBeInstanceOf(Error);
    expect(`${err?.name} ${err?.message}`).toMatch(/SASL|authentication/i);
    expect(err?.message).not.toContain(wrong);
    expect(await bus.healthy()).toBe(false);
  });

  it('a plaintext bus cannot use the SCRAM listener', async () => {
    const { bus } = busFromEnv({});
    expect(await bus.healthy()).toBe(false);
  });
});
