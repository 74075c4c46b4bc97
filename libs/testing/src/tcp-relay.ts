import net from 'node:net';

/**
 * A TCP relay on loopback in front of a server (Postgres in the tests and the chaos run) that can
 * drop the connections it carries silently: `freezeLive` stops moving their bytes in both
 * directions and keeps them open, as a firewall or NAT that forgot a flow, or a host gone without
 * a reset, looks to both ends (nothing fails; nothing is answered). Connections opened after it
 * pass as before, unless `freezeNew` says to freeze those too. `releaseFrozen` closes the frozen ones, as the kernel would after its
 * retransmissions (~15 minutes).
 */
export interface TcpRelay {
  readonly port: number;
  /** `url` (a postgres:// or other URL) pointed at the relay instead of its server */
  via(url: string): string;
  /** freezes every connection it carries now; returns how many */
  freezeLive(): number;
  /** while on, a new connection is accepted and frozen at once (its server never answers it) */
  freezeNew(on: boolean): void;
  /** closes the frozen connections (both sides); returns how many there were */
  releaseFrozen(): number;
  close(): Promise<void>;
}

export async function startTcpRelay(target: { host: string; port: number }): Promise<TcpRelay> {
  const live = new Set<[net.Socket, net.Socket]>();
  const frozen = new Set<[net.Socket, net.Socket]>();
  let freezingNew = false;
  const server = net.createServer((client) => {
    if (freezingNew) {
      client.pause();
      frozen.add([client, client]);
      return;
    }
    const upstream = net.connect(target.port, target.host);
    const pair: [net.Socket, net.Socket] = [client, upstream];
    live.add(pair);
    client.pipe(upstream);
    upstream.pipe(client);
    const end = () => {
      client.destroy();
      upstream.destroy();
      live.delete(pair);
    };
    client.on('error', end);
    upstream.on('error', end);
    client.on('close', () => {
      if (!frozen.has(pair)) end();
    });
    upstream.on('close', () => {
      if (!frozen.has(pair)) end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  const relay: TcpRelay = {
    port,
    via(url: string) {
      const u = new URL(url);
      u.hostname = '127.0.0.1';
      u.port = String(port);
      return u.href;
    },
    freezeLive() {
      for (const pair of live) {
        const [client, upstream] = pair;
        client.unpipe(upstream);
        upstream.unpipe(client);
        client.pause();
        upstream.pause();
        frozen.add(pair);
      }
      const n = live.size;
      live.clear();
      return n;
    },
    freezeNew(on: boolean) {
      freezingNew = on;
    },
    releaseFrozen() {
      const n = frozen.size;
      for (const [client, upstream] of frozen) {
        client.destroy();
        upstream.destroy();
      }
      frozen.clear();
      return n;
    },
    async close() {
      relay.releaseFrozen();
      for (const [client, upstream] of live) {
        client.destroy();
        upstream.destroy();
      }
      await new Promise((resolve) => server.close(resolve));
    },
  };
  return relay;
}
