import { randomUUID } from 'node:crypto';
import { Topics } from '@gateway/contracts';
import { PermanentPublishError, RawMessage } from './produce-coalescer';
import { BatchOutcome, OutboxRelay, OutboxRow, OutboxStore } from './outbox-relay';

const quiet = { info: () => undefined, warn: () => undefined, error: () => undefined };
const topic = Topics.policyChanged.name;

function row(id: number, change = 'c'): OutboxRow {
  return {
    id: BigInt(id),
    topic,
    key: `k${id}`,
    payload: { event_id: randomUUID(), timestamp: new Date(0).toISOString(), entity: 'route', entity_id: `e${id}`, change, actor: 'a' },
  };
}

/** A store holding `rows` that hands them to the relay once and records what it deleted. */
function storeOf(rows: OutboxRow[]) {
  const result: { outcome?: BatchOutcome } = {};
  const store: OutboxStore = {
    drainBatch: async (_limit, publish) => {
      const outcome = await publish(rows);
      result.outcome = outcome;
      return { claimed: rows.length, ...outcome };
    },
    deletePublished: async () => undefined,
  };
  return { store, result };
}

/** A publisher that refuses any send containing a value longer than `maxValue`, or fails transiently from `downAfter` sends on. */
function publisher(opts: { maxValue?: number; downAfter?: number }) {
  const sent: string[][] = [];
  return {
    sent,
    publishRaw: async (_topic: string, messages: RawMessage[]) => {
      if (opts.downAfter !== undefined && sent.length >= opts.downAfter) throw new Error('Connection error: ECONNREFUSED');
      if (opts.maxValue !== undefined && messages.some((m) => m.value.length > opts.maxValue!)) {
        throw new PermanentPublishError('MESSAGE_TOO_LARGE', new Error('too large'));
      }
      sent.push(messages.map((m) => m.key));
    },
  };
}

describe('OutboxRelay sweep', () => {
  it('isolates the refused row of a batch, quarantines it and publishes every other row', async () => {
    const rows = [row(1), row(2), row(3, 'x'.repeat(5000)), row(4), row(5)];
    const { store, result } = storeOf(rows);
    const pub = publisher({ maxValue: 1000 });
    const counted: unknown[] = [];
    const swept: Array<[unknown, number | undefined]> = [];
    await new OutboxRelay(store, pub, quiet, {
      quarantineCounter: { inc: (l) => counted.push(l) },
      sweptCounter: { inc: (l, n) => swept.push([l, n]) },
    }).drain();
    expect(result.outcome?.published).toEqual([1n, 2n, 4n, 5n]);
    expect(swept.reduce((sum: number, [, n]) => sum + (n as number), 0)).toBe(4); // k1, k2, k4, k5; not the refused row
    expect(result.outcome?.quarantined).toEqual([{ id: 3n, topic, reason: 'message_too_large' }]);
    expect(pub.sent.flat()).toEqual(['k1', 'k2', 'k4', 'k5']);
    expect(counted).toEqual([{ topic, reason: 'message_too_large' }]);
  });

  it('a transient failure quarantines nothing and keeps what went out before it', async () => {
    const rows = [row(1), row(2), row(3)];
    const { store, result } = storeOf(rows);
    const pub = publisher({ downAfter: 1 });
    await new OutboxRelay(store, pub, quiet, { maxSendBytes: 1 }).drain();
    expect(result.outcome?.published).toEqual([1n]);
    expect(result.outcome?.quarantined).toEqual([]);
    expect(result.outcome?.error?.message).toMatch(/ECONNREFUSED/);
  });

  it('never sends a row whose payload fails its topic schema or whose topic is not declared', async () => {
    const bad = { ...row(2), payload: { entity: 'nope' } };
    const undeclared = { ...row(3), topic: 'gateway.nowhere.v1' };
    const { store, result } = storeOf([row(1), bad, undeclared]);
    const pub = publisher({});
    await new OutboxRelay(store, pub, quiet).drain();
    expect(pub.sent.flat()).toEqual(['k1']);
    expect(result.outcome?.quarantined).toEqual([
      { id: 2n, topic, reason: 'schema_invalid' },
      { id: 3n, topic: 'gateway.nowhere.v1', reason: 'unknown_topic' },
    ]);
  });

  it('a row standing for several messages is published once all of them went out, and set aside once if one is refused', async () => {
    // row 1 stands for three messages (a settled batch's events share their row's id)
    const part = (key: string, change = 'c') => ({ ...row(1, change), key });
    const stopped = storeOf([part('1a'), part('1b'), part('1c'), row(2)]);
    await new OutboxRelay(stopped.store, publisher({ downAfter: 2 }), quiet, { maxSendBytes: 1 }).drain();
    expect(stopped.result.outcome?.published).toEqual([]); // 1a and 1b went out, 1c did not: the row stays
    expect(stopped.result.outcome?.error?.message).toMatch(/ECONNREFUSED/);

    const refused = storeOf([part('1a'), part('1b', 'x'.repeat(5000)), part('1c'), row(2)]);
    const pub = publisher({ maxValue: 1000 });
    const counted: unknown[] = [];
    const swept: Array<[unknown, number | undefined]> = [];
    await new OutboxRelay(refused.store, pub, quiet, {
      quarantineCounter: { inc: (l) => counted.push(l) },
      sweptCounter: { inc: (l, n) => swept.push([l, n]) },
    }).drain();
    expect(refused.result.outcome?.published).toEqual([2n]);
    expect(refused.result.outcome?.quarantined).toEqual([{ id: 1n, topic, reason: 'message_too_large' }]);
    expect(pub.sent.flat()).toEqual(['1a', '1c', 'k2']);
    expect(counted).toEqual([{ topic, reason: 'message_too_large' }]);
    // messages, each send counted once: 1a, then 1c and k2 (the send of 1b was refused)
    expect(swept).toEqual([
      [{ topic }, 1],
      [{ topic }, 2],
    ]);
  });

  it('cuts sends at maxSendBytes so rows that fit alone are not refused together', async () => {
    const rows = [row(1, 'x'.repeat(400)), row(2, 'x'.repeat(400)), row(3, 'x'.repeat(400))];
    const { store } = storeOf(rows);
    const pub = publisher({});
    await new OutboxRelay(store, pub, quiet, { maxSendBytes: 1000 }).drain();
    expect(pub.sent).toEqual([['k1'], ['k2'], ['k3']]);
  });
});

describe('OutboxRelay sweep schedule', () => {
  it('backs off while sweeps find nothing and sweeps at the base interval again after a commit', async () => {
    jest.useFakeTimers();
    try {
      const sweeps: number[] = [];
      const store: OutboxStore = {
        drainBatch: async () => {
          sweeps.push(Date.now());
          return { claimed: 0, published: [], quarantined: [] };
        },
        deletePublished: async () => undefined,
      };
      const t0 = Date.now();
      const relay = new OutboxRelay(store, publisher({}), quiet, { sweepIntervalMs: 1000, sweepIdleMaxMs: 8000 });
      relay.start();
      await jest.advanceTimersByTimeAsync(36_000);
      const gaps = (from: number) => sweeps.slice(from).map((t, i) => t - (i === 0 ? t0 : sweeps[from + i - 1]));
      // at once, then every second for the 10 s grace, then 2, 4, 8, 8… s
      expect(gaps(0)).toEqual([0, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 2000, 4000, 8000, 8000]);
      const before = sweeps.length;
      // 36 s in, the next sweep is due at 40 s; a commit cuts that short.
      relay.publishCommitted([row(1)]);
      await jest.advanceTimersByTimeAsync(1000);
      expect(sweeps.length).toBe(before + 1);
      await relay.stop();
    } finally {
      jest.useRealTimers();
    }
  });
});

describe('OutboxRelay deletes', () => {
  it('runs one DELETE at a time; rows published meanwhile are deleted together by the next one', async () => {
    const calls: bigint[][] = [];
    let inFlight = 0;
    let maxInFlight = 0;
    let release: () => void = () => undefined;
    const store: OutboxStore = {
      drainBatch: async () => ({ claimed: 0, published: [], quarantined: [] }),
      deletePublished: async (ids) => {
        calls.push(ids);
        maxInFlight = Math.max(maxInFlight, ++inFlight);
        if (calls.length === 1) await new Promise<void>((r) => (release = r));
        inFlight -= 1;
      },
    };
    const relay = new OutboxRelay(store, publisher({}), quiet, { deleteDelayMs: 0 });
    relay.publishCommitted([row(1)]);
    while (calls.length === 0) await new Promise((r) => setTimeout(r, 1));
    for (const id of [2, 3, 4]) relay.publishCommitted([row(id)]);
    await new Promise((r) => setTimeout(r, 5)); // their delete timers fire while the first DELETE runs
    release();
    await relay.stop();
    expect(calls).toEqual([[1n], [2n, 3n, 4n]]);
    expect(maxInFlight).toBe(1);
  });
});

describe('OutboxRelay failed direct sends', () => {
  it('hands the rows of a failed direct send to its next sweep at once, and forgets them once swept', async () => {
    const retries: Array<readonly bigint[]> = [];
    const deleted: bigint[] = [];
    const store: OutboxStore = {
      drainBatch: async (_limit, _publish, retryIds = []) => {
        retries.push([...retryIds]);
        return { claimed: 0, published: [], quarantined: [] };
      },
      deletePublished: async (ids) => void deleted.push(...ids),
    };
    const relay = new OutboxRelay(store, publisher({ downAfter: 0 }), quiet, { sweepIntervalMs: 60_000, deleteDelayMs: 0 });
    relay.start();
    while (retries.length === 0) await new Promise((r) => setTimeout(r, 1));
    relay.publishCommitted([row(7), row(8)]);
    // the failure kicks a sweep (the base interval is a minute away) that names both rows
    while (retries.length < 2) await new Promise((r) => setTimeout(r, 1));
    expect(retries[1]).toEqual([7n, 8n]);
    relay.kick();
    while (retries.length < 3) await new Promise((r) => setTimeout(r, 1));
    expect(retries[2]).toEqual([]);
    expect(deleted).toEqual([]); // never deleted as published by the direct path
    await relay.stop();
  });
});

describe('OutboxRelay deletes on a busy relay', () => {
  it('keeps deleting after a delete timer fires with nothing left to delete (the running DELETE took its ids)', async () => {
    const calls: bigint[][] = [];
    let release: () => void = () => undefined;
    const store: OutboxStore = {
      drainBatch: async () => ({ claimed: 0, published: [], quarantined: [] }),
      deletePublished: async (ids) => {
        calls.push(ids);
        if (calls.length === 1) await new Promise<void>((r) => (release = r));
      },
    };
    const relay = new OutboxRelay(store, publisher({}), quiet, { deleteDelayMs: 30 });
    relay.publishCommitted([row(1)]);
    while (calls.length === 0) await new Promise((r) => setTimeout(r, 1));
    // row 2's delete timer is set now; the running loop deletes row 2 before that timer fires
    relay.publishCommitted([row(2)]);
    await new Promise((r) => setImmediate(r));
    release();
    while (calls.length < 2) await new Promise((r) => setTimeout(r, 1));
    await new Promise((r) => setTimeout(r, 60)); // row 2's timer fires on an empty queue
    relay.publishCommitted([row(3)]);
    const until = Date.now() + 2000;
    while (calls.length < 3 && Date.now() < until) await new Promise((r) => setTimeout(r, 5));
    await relay.stop();
    expect(calls).toEqual([[1n], [2n], [3n]]);
  });
});
