import 'reflect-metadata';
import { spawn } from 'node:child_process';
import type { AddressInfo } from 'node:net';
import { INestApplication, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { listenWithBacklog } from '../src/bootstrap';
import { LISTEN_BACKLOG_DEFAULT } from '../src/config';

@Module({})
class NothingModule {}

/**
 * A child process opens `clients` connections to the port while this process's event loop is
 * blocked, so nothing is accepted meanwhile, and prints how many completed their handshake within
 * 800 ms: those the kernel queued. The others' SYNs were dropped, and a dropped SYN is sent again
 * only after a second.
 */
const CONNECTER = `
const net = require('node:net');
const [port, clients] = process.argv.slice(1).map(Number);
process.stdout.write('ready\\n');
setTimeout(() => {
  let connected = 0;
  const sockets = Array.from({ length: clients }, () => net.connect(port, '127.0.0.1', () => (connected += 1)).on('error', () => undefined));
  setTimeout(() => {
    process.stdout.write(String(connected) + '\\n');
    for (const s of sockets) s.destroy();
    process.exit(0);
  }, 800);
}, 100);
`;

async function queuedWhileBusy(port: number, clients: number): Promise<number> {
  const child = spawn(process.execPath, ['-e', CONNECTER, String(port), String(clients)], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (chunk: string) => (out += chunk));
  await new Promise<void>((resolve) => {
    const ready = () => (out.includes('ready\n') ? resolve() : child.stdout.once('data', ready));
    ready();
  });
  // The event loop blocked for 2.5 s: no accept() until the child has counted (at ~0.9 s; the slack
  // is for a busy box), and a dropped SYN's retries (1 s, then 3 s after the first) find it full.
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 2500);
  await new Promise((resolve) => child.once('exit', resolve));
  const lines = out.trim().split('\n');
  return Number(lines[lines.length - 1]);
}

describe('listenWithBacklog (GATEWAY_LISTEN_BACKLOG)', () => {
  let app: INestApplication | undefined;
  afterEach(async () => {
    await app?.close();
    app = undefined;
  });

  async function listening(backlog: number): Promise<number> {
    app = await NestFactory.create(NothingModule, { logger: false });
    await listenWithBacklog(app, 0, '127.0.0.1', backlog);
    return (app.getHttpServer().address() as AddressInfo).port;
  }

  it('the kernel queues no more connections than the backlog while the service is too busy to accept them', async () => {
    const port = await listening(4);
    // Linux queues backlog + 1 (the queue is full only past the backlog)
    const queued = await queuedWhileBusy(port, 16);
    expect(queued).toBeGreaterThanOrEqual(4);
    expect(queued).toBeLessThanOrEqual(5);
  });

  it('with a backlog larger than the clients, every one of them is queued (the count above is the backlog, not the box)', async () => {
    expect(LISTEN_BACKLOG_DEFAULT).toBeGreaterThan(16);
    const port = await listening(LISTEN_BACKLOG_DEFAULT);
    expect(await queuedWhileBusy(port, 16)).toBe(16);
  });
});
