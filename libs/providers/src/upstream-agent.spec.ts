import { createServer, Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { request } from 'undici';
import { upstreamAgent } from './upstream-agent';

let server: Server;
let port: number;

beforeAll(async () => {
  server = createServer((_req, res) => res.end('ok'));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
});
afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
});

async function get(url: string, allowlist: string[]): Promise<string> {
  const agent = upstreamAgent(allowlist);
  try {
    const res = await request(url, { dispatcher: agent });
    return await res.body.text();
  } catch (err) {
    return (err as Error).name;
  } finally {
    await agent.close();
  }
}

describe('upstreamAgent', () => {
  it('connects to an allowlisted loopback address', async () => {
    expect(await get(`http://127.0.0.1:${port}/`, ['127.0.0.1'])).toBe('ok');
  });

  it('refuses a host that is not allowlisted before connecting', async () => {
    expect(await get(`http://127.0.0.1:${port}/`, ['api.openai.com'])).toBe('UpstreamNotAllowedError');
  });

  it('refuses an allowlisted name that resolves to a private address at connect time', async () => {
    // `localhost` is allowlisted as a name, but what it resolves to (loopback) is not.
    expect(await get(`http://localhost:${port}/`, ['localhost'])).toBe('UpstreamNotAllowedError');
  });
});
