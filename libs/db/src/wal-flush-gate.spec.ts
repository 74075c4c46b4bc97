import { parseLsn, WalFlushGate, WalPosition } from './wal-flush-gate';

/** A server whose WAL positions the test moves; each read answers the current ones. */
function server(start = 'run-1') {
  const s = { insert: 100n, flush: 100n, startedAt: start, reads: 0, fail: null as Error | null, gate: null as null | (() => void) };
  const position = async (): Promise<WalPosition> => {
    s.reads++;
    if (s.gate) await new Promise<void>((r) => (s.gate = r));
    if (s.fail) throw s.fail;
    return { insertLsn: s.insert, flushLsn: s.flush, serverStartedAt: s.startedAt };
  };
  return { s, position };
}

const gates: Array<WalFlushGate<string>> = [];
afterEach(() => Promise.all(gates.splice(0).map((g) => g.stop())));

function gateOn(position: () => Promise<WalPosition>, intervalMs = 60_000) {
  const released: string[] = [];
  const dropped: Array<{ items: string[]; reason: string; detail?: string }> = [];
  const gate = new WalFlushGate<string>(
    position,
    (items) => released.push(...items),
    (items, reason, detail) => dropped.push(detail === undefined ? { items, reason } : { items, reason, detail }),
    intervalMs,
  );
  gates.push(gate);
  return { gate, released, dropped };
}

describe('parseLsn', () => {
  it('orders LSNs as Postgres does (high word, then low word)', () => {
    expect(parseLsn('0/16B3748')).toBe(0x16b3748n);
    expect(parseLsn('16/B374D848')).toBe((0x16n << 32n) | 0xb374d848n);
    expect(parseLsn('1/0') > parseLsn('0/FFFFFFFF')).toBe(true);
    expect(() => parseLsn('16B374D848')).toThrow('not an LSN');
  });
});

describe('WalFlushGate', () => {
  it('releases a commit only once the flush has passed the insert position read after it', async () => {
    const { s, position } = server();
    const { gate, released, dropped } = gateOn(position);
    s.insert = 500n; // the commit's records are below this
    gate.add(['a', 'b'], 'run-1');

    await gate.look(); // target 500, flushed 100
    expect(released).toEqual([]);
    s.flush = 499n;
    await gate.look();
    expect(released).toEqual([]);
    s.insert = 900n; // later commits do not move an item's target
    s.flush = 500n;
    await gate.look();
    expect(released).toEqual(['a', 'b']);
    expect(gate.waiting).toBe(0);
    expect(dropped).toEqual([]);
  });

  it('gives what is handed in while a read is out the next read as its target', async () => {
    const { s, position } = server();
    const { gate, released } = gateOn(position);
    s.insert = 200n;
    gate.add(['early'], 'run-1');
    s.gate = () => undefined;
    const first = gate.look();
    await new Promise((r) => setImmediate(r));
    gate.add(['late'], 'run-1'); // committed after the read was taken: its records may be above 200
    s.flush = 200n;
    const open = s.gate;
    s.gate = null;
    open();
    await first;
    expect(released).toEqual(['early']);
    s.insert = 300n;
    await gate.look(); // target 300
    expect(released).toEqual(['early']);
    s.flush = 300n;
    await gate.look();
    expect(released).toEqual(['early', 'late']);
  });

  it('drops, never releases, what was committed in a run of the server before a restart', async () => {
    const { s, position } = server('run-1');
    const { gate, released, dropped } = gateOn(position);
    s.insert = 500n;
    gate.add(['a'], 'run-1');
    await gate.look();
    // the server crashes and recovers: the unflushed commit may be gone, and the new run's WAL soon passes 500
    s.startedAt = 'run-2';
    s.flush = 10_000n;
    s.insert = 10_000n;
    gate.add(['b'], 'run-2');
    await gate.look();
    expect(released).toEqual(['b']);
    expect(dropped).toEqual([{ items: ['a'], reason: 'restarted' }]);
  });

  it('drops everything held when the position cannot be read', async () => {
    const { s, position } = server();
    const { gate, released, dropped } = gateOn(position);
    gate.add(['a'], 'run-1');
    s.fail = new Error('connection terminated');
    await gate.look();
    expect(released).toEqual([]);
    expect(dropped).toEqual([{ items: ['a'], reason: 'unreadable', detail: 'connection terminated' }]);
    expect(gate.waiting).toBe(0);
  });

  it('looks on its own until nothing is held, and drops what is left when stopped', async () => {
    const { s, position } = server();
    const { gate, released, dropped } = gateOn(position, 5);
    s.insert = 150n;
    gate.add(['a'], 'run-1');
    await new Promise((r) => setTimeout(r, 40));
    expect(released).toEqual([]);
    s.flush = 150n;
    for (let i = 0; i < 100 && released.length === 0; i++) await new Promise((r) => setTimeout(r, 5));
    expect(released).toEqual(['a']);
    const reads = s.reads;
    await new Promise((r) => setTimeout(r, 40));
    expect(s.reads).toBe(reads); // nothing held: no reads

    s.insert = 400n;
    gate.add(['b'], 'run-1');
    await gate.stop();
    expect(dropped).toEqual([{ items: ['b'], reason: 'stopped' }]);
    gate.add(['c'], 'run-1');
    expect(dropped[1]).toEqual({ items: ['c'], reason: 'stopped' });
  });
});
