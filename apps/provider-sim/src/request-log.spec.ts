import { RequestLog, type SimRequestLogEntry } from './request-log';

const entry = (path: string): Omit<SimRequestLogEntry, 'seq'> => ({
  time: new Date(0).toISOString(),
  method: 'POST',
  path,
  provider: 'openai',
  model: 'm',
  candidateCount: null,
  maxTokens: null,
  stream: false,
  directives: ['serve=1'],
  providerRequestId: null,
  clientRequestId: null,
  idempotencyKey: null,
  fingerprint: 'f',
  keyHeader: 'none',
  keyVerdict: 'not_required',
  status: 200,
  aborted: false,
  abortedAt: null,
  abortedAfterMs: null,
  wouldBill: null,
  durationMs: 1,
  candidateFields: {},
  capFields: {},
  pricedFields: [],
  store: null,
});

describe('RequestLog', () => {
  it('assigns increasing seq and filters by since', () => {
    const log = new RequestLog();
    log.add(entry('/a'));
    log.add(entry('/b'));
    log.add(entry('/c'));
    expect(log.list().map((e) => e.seq)).toEqual([1, 2, 3]);
    expect(log.list(2).map((e) => e.path)).toEqual(['/c']);
  });

  it('returns copies', () => {
    const log = new RequestLog();
    log.add(entry('/a'));
    const [copy] = log.list();
    copy.directives.push('x');
    copy.status = 500;
    expect(log.list()[0]).toMatchObject({ status: 200, directives: ['serve=1'] });
  });

  it('copies the would-bill usage of an aborted entry', () => {
    const log = new RequestLog();
    const bill = { promptTokens: 5, cachedTokens: 0, outputTokens: 3, reasoningTokens: 0 };
    log.add({ ...entry('/a'), aborted: true, abortedAt: 'before_first_byte', abortedAfterMs: 40, wouldBill: bill });
    log.list()[0].wouldBill!.outputTokens = 99;
    expect(log.list()[0].wouldBill).toEqual(bill);
  });

  it('clear keeps seq increasing, reset restarts it', () => {
    const log = new RequestLog();
    log.add(entry('/a'));
    log.clear();
    expect(log.list()).toEqual([]);
    expect(log.add(entry('/b')).seq).toBe(2);
    log.reset();
    expect(log.add(entry('/c')).seq).toBe(1);
  });

  it('keeps only the newest entries beyond its limit', () => {
    const log = new RequestLog(2);
    for (const p of ['/a', '/b', '/c']) log.add(entry(p));
    expect(log.list().map((e) => [e.seq, e.path])).toEqual([
      [2, '/b'],
      [3, '/c'],
    ]);
  });
});
