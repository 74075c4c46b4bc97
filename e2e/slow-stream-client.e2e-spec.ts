import http from 'node:http';
import { settledAction } from './actions';
import { counter, eventually, serviceLogs, simLastSeq, simRequestsSince, stack, uid, withSeeder, seedSimRouteWorkload } from './support';

/**
 * A client that opens a stream and stops reading it. Replies cannot be paused (dispatch relays the
 * provider's stream as it comes), so before admission bounded what waits for one client
 * (STREAM_CLIENT_BACKLOG_MAX_BYTES, 8 MiB) it kept the rest of the answer in its heap, for as long
 * as the client liked. provider-sim's `pad-chunks` makes a ~38 MiB stream of 300 chunks.
 */
describe('a stream client that stops reading', () => {
  const run = uid();
  const route = `slow-reader-${run}`;
  let key: string;

  beforeAll(async () => {
    key = await withSeeder((seed) =>
      seedSimRouteWorkload(seed, route, `sim-gpt;words=300;pad-chunks=${128 * 1024}`, `slow-reader-wl-${run}`),
    );
  });

  const stops = () =>
    counter(`${stack.admission}/metrics`, 'gateway_admission_relay_stops_total', { reason: 'client_too_slow', outcome: 'published' });

  it('has its connection closed once ~8 MiB wait for it; the provider is called once and the attempt settles', async () => {
    const before = await simLastSeq();
    const stopsBefore = await stops();
    const url = new URL('/v1/chat/completions', stack.admission);
    const req = http.request(url, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' } });
    req.on('error', () => undefined); // the reset the closing may bring
    req.end(JSON.stringify({ model: route, stream: true, messages: [{ role: 'user', content: 'a long answer, please' }] }));
    const res = await new Promise<http.IncomingMessage>((resolve) => req.once('response', resolve));
    expect(res.statusCode).toBe(200);
    const actionId = String(res.headers['x-gateway-action-id']);
    res.on('error', () => undefined);
    res.pause(); // the client stops reading: the kernel's buffers fill, then admission's

    // The provider's stream runs to its end and settles whatever the client does.
    const status = await settledAction(key, actionId);
    expect(status.attempts).toHaveLength(1);
    expect(status.attempts[0]).toMatchObject({ status: 'settled', usage_source: 'stream_final_chunk' });
    expect(await simRequestsSince(before)).toHaveLength(1);

    // Reading again, the client finds the stream cut: what the buffers held, then the close (a
    // close is in-band, after the data, so a paused client cannot see it earlier). Without the
    // bound it would read the whole ~38 MiB and the end marker, every byte held for it meanwhile.
    let received = 0;
    let tail = '';
    res.on('data', (chunk: Buffer) => {
      received += chunk.length;
      tail = (tail + chunk.toString('latin1')).slice(-64);
    });
    const closed = new Promise<void>((resolve) => res.once('close', resolve));
    res.resume();
    await closed;
    expect(received).toBeGreaterThan(1024 * 1024);
    expect(received).toBeLessThan(30 * 1024 * 1024);
    expect(tail).not.toContain('[DONE]');
    await eventually(async () => (serviceLogs().includes(`"action_id":"${actionId}","backlog_bytes"`) ? true : undefined), {
      what: "admission's warning for the client that does not read",
    });
    // and dispatch was told to stop relaying what is left of it (how much is left depends on timing)
    expect(await stops()).toBe(stopsBefore + 1);
  }, 60_000);
});
