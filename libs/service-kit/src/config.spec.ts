import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadConfig, loadHttpInputConfig } from './config';

const base = { DATABASE_URL: 'postgresql://x' };

describe('loadConfig: Kafka security', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kafka-config-'));
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('is plaintext unless asked', () => {
    expect(loadConfig('t', base).kafkaSecurity).toBeUndefined();
    expect(loadConfig('t', { ...base, KAFKA_SSL: 'false' }).kafkaSecurity).toBeUndefined();
  });

  it('KAFKA_SSL uses the system trust store; a CA file adds a private CA (and implies TLS)', () => {
    expect(loadConfig('t', { ...base, KAFKA_SSL: 'true' }).kafkaSecurity).toEqual({ ssl: true });
    const ca = path.join(dir, 'ca.pem');
    fs.writeFileSync(ca, '-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n');
    expect(loadConfig('t', { ...base, KAFKA_SSL_CA_FILE: ca }).kafkaSecurity?.ssl).toEqual({ ca: fs.readFileSync(ca, 'utf8') });
  });

  it('SCRAM takes the password from the variable or a file, and never serialises it', () => {
    const file = path.join(dir, 'pw');
    fs.writeFileSync(file, 's3cret-from-file\n');
    const fromFile = loadConfig('t', {
      ...base,
      KAFKA_SASL_MECHANISM: 'SCRAM-SHA-512',
      KAFKA_SASL_USERNAME: 'u',
      KAFKA_SASL_PASSWORD_FILE: file,
    });
    expect(fromFile.kafkaSecurity?.sasl).toMatchObject({ mechanism: 'scram-sha-512', username: 'u' });
    expect(fromFile.kafkaSecurity?.sasl?.password).toBe('s3cret-from-file');
    expect(JSON.stringify(fromFile)).not.toContain('s3cret');
    const fromVar = loadConfig('t', {
      ...base,
      KAFKA_SASL_MECHANISM: 'scram-sha-256',
      KAFKA_SASL_USERNAME: 'u',
      KAFKA_SASL_PASSWORD: 'pw-var',
    });
    expect(fromVar.kafkaSecurity?.sasl?.password).toBe('pw-var');
    expect(JSON.stringify(fromVar)).not.toContain('pw-var');
  });

  it.each([
    [{ KAFKA_SASL_MECHANISM: 'scram-sha-256', KAFKA_SASL_PASSWORD: 'p' }, /KAFKA_SASL_USERNAME/],
    [{ KAFKA_SASL_MECHANISM: 'scram-sha-256', KAFKA_SASL_USERNAME: 'u' }, /exactly one/],
    [
      { KAFKA_SASL_MECHANISM: 'scram-sha-256', KAFKA_SASL_USERNAME: 'u', KAFKA_SASL_PASSWORD: 'p', KAFKA_SASL_PASSWORD_FILE: '/f' },
      /exactly one/,
    ],
    [{ KAFKA_SASL_USERNAME: 'u', KAFKA_SASL_PASSWORD: 'p' }, /need KAFKA_SASL_MECHANISM/],
    [{ KAFKA_SASL_MECHANISM: 'plain', KAFKA_SASL_USERNAME: 'u', KAFKA_SASL_PASSWORD: 'p' }, /scram-sha-256/],
  ])('refuses an incomplete or unsupported SASL setting %#', (env, message) => {
    const run = () => loadConfig('t', { ...base, ...env });
    expect(run).toThrow(message);
    try {
      run();
    } catch (err) {
      expect((err as Error).message).not.toMatch(/\bp\b/);
    }
  });
});

describe('loadConfig: instance and connection budget', () => {
  it('each process has a pool of DATABASE_POOL_MAX connections (10 unless set), bounded to 1..100', () => {
    expect(loadConfig('t', base).databasePoolMax).toBe(10);
    expect(loadConfig('t', { ...base, DATABASE_POOL_MAX: '4' }).databasePoolMax).toBe(4);
    expect(() => loadConfig('t', { ...base, DATABASE_POOL_MAX: '0' })).toThrow();
    expect(() => loadConfig('t', { ...base, DATABASE_POOL_MAX: '1.5' })).toThrow();
  });

  it('closes a connection whose statement is unanswered for DATABASE_ANSWER_TIMEOUT_MS (default 30 s, whole ms from 1 s)', () => {
    expect(loadConfig('t', base).databaseAnswerTimeoutMs).toBe(30_000);
    expect(loadConfig('t', { ...base, DATABASE_ANSWER_TIMEOUT_MS: '120000' }).databaseAnswerTimeoutMs).toBe(120_000);
    for (const hostile of ['0', '999', '-1', '2.5', '1e999', 'forever', '30000\u0000', '2147483648'])
      expect(() => loadConfig('t', { ...base, DATABASE_ANSWER_TIMEOUT_MS: hostile })).toThrow(/DATABASE_ANSWER_TIMEOUT_MS/);
  });

  it('has the server end a session idle in a transaction after DATABASE_IDLE_IN_TRANSACTION_MS (default 15 s; 0 = none; else above the longest transaction)', () => {
    expect(loadConfig('t', base).databaseIdleInTransactionMs).toBe(15_000);
    expect(loadConfig('t', { ...base, DATABASE_IDLE_IN_TRANSACTION_MS: '0' }).databaseIdleInTransactionMs).toBe(0);
    expect(loadConfig('t', { ...base, DATABASE_IDLE_IN_TRANSACTION_MS: '11001' }).databaseIdleInTransactionMs).toBe(11_001);
    // at or below 11 s a live transaction (10 s, then Prisma's rollback) could be ended by the server
    for (const hostile of ['11000', '5000', '-1', '2.5', '1e999', 'never', '15000\u0000', '2147483648'])
      expect(() => loadConfig('t', { ...base, DATABASE_IDLE_IN_TRANSACTION_MS: hostile })).toThrow(/DATABASE_IDLE_IN_TRANSACTION_MS/);
  });

  it('keeps idle pool connections open unless DATABASE_POOL_IDLE_MS says how long (whole ms, 0 = keep)', () => {
    expect(loadConfig('t', base).databasePoolIdleMs).toBe(0);
    expect(loadConfig('t', { ...base, DATABASE_POOL_IDLE_MS: '30000' }).databasePoolIdleMs).toBe(30000);
    expect(() => loadConfig('t', { ...base, DATABASE_POOL_IDLE_MS: '-1' })).toThrow();
    expect(() => loadConfig('t', { ...base, DATABASE_POOL_IDLE_MS: '2.5' })).toThrow();
    expect(() => loadConfig('t', { ...base, DATABASE_POOL_IDLE_MS: 'forever' })).toThrow();
    expect(() => loadConfig('t', { ...base, DATABASE_POOL_IDLE_MS: '1e999' })).toThrow();
    // past a timer's range node would fire the idle timeout after 1 ms: refused, not shortened
    expect(loadConfig('t', { ...base, DATABASE_POOL_IDLE_MS: '2147483647' }).databasePoolIdleMs).toBe(2147483647);
    expect(() => loadConfig('t', { ...base, DATABASE_POOL_IDLE_MS: '2147483648' })).toThrow();
  });

  it('sheds on a dispatch queue longer than ADMISSION_SHED_QUEUE_MS (0, off, unless set), revised every ADMISSION_SHED_WINDOW_MS (250)', () => {
    expect(loadConfig('t', base).admissionShed).toEqual({ targetMs: 0, windowMs: 250 });
    expect(loadConfig('t', { ...base, ADMISSION_SHED_QUEUE_MS: '300', ADMISSION_SHED_WINDOW_MS: '50' }).admissionShed).toEqual({
      targetMs: 300,
      windowMs: 50,
    });
    for (const hostile of ['-1', '1.5', '600001', 'NaN', 'Infinity', '1e999', '100\u0000']) {
      expect(() => loadConfig('t', { ...base, ADMISSION_SHED_QUEUE_MS: hostile })).toThrow(/ADMISSION_SHED_QUEUE_MS/);
    }
    for (const hostile of ['0', '9', '60001', 'abc', '']) {
      expect(() => loadConfig('t', { ...base, ADMISSION_SHED_WINDOW_MS: hostile })).toThrow(/ADMISSION_SHED_WINDOW_MS/);
    }
  });

  it("bounds admission's own work by ADMISSION_DECIDE_TIMEOUT_MS (3000 unless set; whole ms, 100..600000)", () => {
    expect(loadConfig('t', base).admissionDecideTimeoutMs).toBe(3000);
    expect(loadConfig('t', { ...base, ADMISSION_DECIDE_TIMEOUT_MS: '1500' }).admissionDecideTimeoutMs).toBe(1500);
    for (const hostile of ['99', '600001', '2.5', '-3000', 'soon', '1e999', 'Infinity', 'NaN', '3000\u0000'])
      expect(() => loadConfig('t', { ...base, ADMISSION_DECIDE_TIMEOUT_MS: hostile })).toThrow(/ADMISSION_DECIDE_TIMEOUT_MS/);
  });

  it('bounds the Idempotency-Key reply cache by REPLY_CACHE_MAX_BYTES (32 MiB unless set; whole bytes, 1 MiB..4 GiB)', () => {
    expect(loadConfig('t', base).replyCacheMaxBytes).toBe(32 * 1024 * 1024);
    expect(loadConfig('t', { ...base, REPLY_CACHE_MAX_BYTES: '2097152' }).replyCacheMaxBytes).toBe(2 * 1024 * 1024);
    for (const hostile of ['1048575', '4294967297', '2.5', '-1', 'lots', '1e999', 'Infinity', 'NaN', '2097152\u0000'])
      expect(() => loadConfig('t', { ...base, REPLY_CACHE_MAX_BYTES: hostile })).toThrow(/REPLY_CACHE_MAX_BYTES/);
  });

  it('the instance id is GATEWAY_INSTANCE_ID, else unique to the process', () => {
    expect(loadConfig('dispatch', { ...base, GATEWAY_INSTANCE_ID: 'dispatch-2' }).instanceId).toBe('dispatch-2');
    expect(loadConfig('dispatch', base).instanceId).toBe(`dispatch-${process.pid}`);
  });
});

describe('loadHttpInputConfig: the listen backlog', () => {
  it('queues at most GATEWAY_LISTEN_BACKLOG connections not yet accepted (64 unless set; whole, 1..65535)', () => {
    expect(loadHttpInputConfig({}).listenBacklog).toBe(64);
    expect(loadHttpInputConfig({ GATEWAY_LISTEN_BACKLOG: '511' }).listenBacklog).toBe(511);
    for (const hostile of ['0', '-1', '65536', '2.5', 'lots', '1e999', 'Infinity', 'NaN', '64\u0000'])
      expect(() => loadHttpInputConfig({ GATEWAY_LISTEN_BACKLOG: hostile })).toThrow(/GATEWAY_LISTEN_BACKLOG/);
  });
});
