import { ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';
import { eventually, stack } from './support';

/** The finance consumer example (examples/finance-consumer) run as a child process of an e2e suite. */
export interface Consumer {
  url: string;
  logs(): string;
  stop(): Promise<void>;
}

/** The example as finance runs it (`npm run finance-consumer`), as a child process of this test. */
export async function startConsumer(opts: {
  port: number;
  group: string;
  schema: string;
  /** more environment (e.g. POLICY_URL and FINANCE_POLICY_TOKEN for experiment reports) */
  env?: Record<string, string>;
}): Promise<Consumer> {
  const root = path.join(__dirname, '..');
  let out = '';
  const child: ChildProcess = spawn(process.execPath, ['-r', '@swc-node/register', 'examples/finance-consumer/src/main.ts'], {
    cwd: root,
    env: {
      ...process.env,
      SWC_NODE_PROJECT: path.join(root, 'tsconfig.json'),
      KAFKA_BROKERS: stack.brokers.join(','),
      FINANCE_DATABASE_URL: stack.databaseUrl,
      FINANCE_DB_SCHEMA: opts.schema,
      FINANCE_CONSUMER_GROUP: opts.group,
      FINANCE_CONSUMER_PORT: String(opts.port),
      ...opts.env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout!.on('data', (d: Buffer) => (out += d.toString('utf8')));
  child.stderr!.on('data', (d: Buffer) => (out += d.toString('utf8')));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const url = `http://127.0.0.1:${opts.port}`;
  const consumer: Consumer = {
    url,
    logs: () => out,
    stop: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([exited, new Promise((r) => (timer = setTimeout(r, 10000)))]);
      clearTimeout(timer);
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    },
  };
  try {
    await eventually(
      async () => {
        if (child.exitCode !== null) throw new Error(`exited ${child.exitCode}`);
        return (await fetch(`${url}/health`)).ok || undefined;
      },
      { timeoutMs: 60000, intervalMs: 200, what: `the finance consumer at ${url}` },
    );
  } catch (err) {
    await consumer.stop();
    throw new Error(`${(err as Error).message}\n${out.slice(-3000)}`);
  }
  return consumer;
}
