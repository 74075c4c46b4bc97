import { ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const ROOT = path.resolve(__dirname, '../../..');

/**
 * A Kafka broker of a test's own, started by scripts/kafka.mjs `startKafka` in a child Node
 * process (jest's CommonJS runtime cannot import an .mjs itself; the child imports it
 * dynamically). The broker belongs to that child: `stop()` asks it to stop the broker cleanly.
 * KAFKA_BROKERS is removed from the child's environment, or startKafka would reuse the shared one.
 */
export interface OwnBroker {
  brokers: string;
  /** the SASL_PLAINTEXT (SCRAM) listener, when started with `scram` */
  saslBrokers?: string;
  stop(): Promise<void>;
}

const SCRIPT = `
const { startKafka } = await import(process.env.KAFKA_MJS_URL);
const scram = process.env.OWN_KAFKA_SCRAM ? JSON.parse(process.env.OWN_KAFKA_SCRAM) : null;
const kafka = await startKafka({ port: Number(process.env.OWN_KAFKA_PORT), dataDir: process.env.OWN_KAFKA_DIR, fresh: process.env.OWN_KAFKA_FRESH === '1', scram });
process.stdout.write(JSON.stringify({ brokers: kafka.brokers, saslBrokers: kafka.saslBrokers }) + '\\n');
process.stdin.once('data', () => kafka.stop().then(() => process.exit(0), () => process.exit(1)));
`;

/** startKafka's `scram` option: a SASL_PLAINTEXT listener on `port` with these users. */
export interface ScramOption {
  port: number;
  users: Array<{ mechanism: 'SCRAM-SHA-256' | 'SCRAM-SHA-512'; username: string; password: string }>;
}

export function startOwnBroker(opts: { port: number; dataDir: string; fresh: boolean; scram?: ScramOption }): Promise<OwnBroker> {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    KAFKA_MJS_URL: pathToFileURL(path.join(ROOT, 'scripts/kafka.mjs')).href,
    OWN_KAFKA_PORT: String(opts.port),
    OWN_KAFKA_DIR: opts.dataDir,
    OWN_KAFKA_FRESH: opts.fresh ? '1' : '0',
    ...(opts.scram ? { OWN_KAFKA_SCRAM: JSON.stringify(opts.scram) } : {}),
  };
  delete env.KAFKA_BROKERS;
  const child: ChildProcessWithoutNullStreams = spawn(process.execPath, ['--input-type=module', '-e', SCRIPT], { cwd: ROOT, env });
  let err = '';
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      const line = out.split('\n')[0];
      if (!out.includes('\n')) return;
      const { brokers, saslBrokers } = JSON.parse(line) as { brokers: string; saslBrokers?: string };
      resolve({
        brokers,
        saslBrokers,
        stop: async () => {
          child.stdin.write('stop\n');
          await exited;
        },
      });
    });
    void exited.then((code) => reject(new Error(`broker helper exited (${code}) before the broker was ready: ${err.slice(-2000)}`)));
  });
}

/**
 * The first port from `from` upward (in steps of 2) where both the broker port and its
 * controller port (port + 1) are free, so a test's broker never lands on another checkout's.
 */
export async function freeBrokerPort(from: number): Promise<number> {
  for (let port = from; port < from + 200; port += 2) {
    if ((await bindable(port)) && (await bindable(port + 1))) return port;
  }
  throw new Error(`no free port pair from ${from}`);
}

function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}
