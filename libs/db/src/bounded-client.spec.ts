import { Database } from './database';

/**
 * The pool's client bounds every statement with a timer (`boundedClient`); a statement that `pg`
 * refuses before sending it must not leave that timer behind, or it would close a sound
 * connection `answerWithinMs` later. No server is needed: the refusals happen before any I/O.
 */
describe('the bounded pg client', () => {
  const db = new Database('postgresql://nobody@127.0.0.1:9/none', { answerWithinMs: 1_000 });
  const Client = (db.pool as unknown as { options: { Client: new () => { query(...a: unknown[]): unknown } } }).options.Client;

  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());
  afterAll(() => db.close());

  it('a statement refused before it is sent leaves no timer', () => {
    const client = new Client();
    expect(() => client.query(null)).toThrow();
    expect(jest.getTimerCount()).toBe(0);
  });

  it('a statement sent starts one timer for its answer', () => {
    const client = new Client();
    const pending = client.query('SELECT 1') as Promise<unknown>;
    pending.catch(() => undefined); // never connected: it waits in the queue
    expect(jest.getTimerCount()).toBe(1);
  });
});
