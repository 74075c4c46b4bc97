import fc from 'fast-check';
import { BackloggedStream, StreamBacklogs } from './stream-backlogs';

/** A stream whose backlog the test sets; `cuts` records the totals it was cut at. */
type TestStream = BackloggedStream & { held: number; cuts: number[] };

/** `n` streams open on a bound of 100 bytes, and a way to report one's backlog as the responder does after a write. */
function instance(n: number) {
  const b = new StreamBacklogs(100);
  const streams: TestStream[] = Array.from({ length: n }, () => {
    const s: TestStream = { held: 0, cuts: [], backlog: () => s.held, cut: (total) => void s.cuts.push(total) };
    b.open(s);
    return s;
  });
  const report = (s: TestStream, held: number) => {
    s.held = held;
    b.grew(s);
  };
  const cuts = () => streams.map((s) => s.cuts);
  return { b, streams, report, cuts };
}

describe("StreamBacklogs: what all of an instance's streams hold for their clients", () => {
  it('under the bound nothing is cut, whatever one stream holds', () => {
    const { b, streams: s, report, cuts } = instance(2);
    report(s[0], 60);
    report(s[1], 40);
    expect(cuts()).toEqual([[], []]);
    expect(b.total).toBe(100);
  });

  it('past it the largest backlog is cut, not the one that grew last; the one that reads keeps its stream', () => {
    const { b, streams: s, report, cuts } = instance(3);
    report(s[0], 70); // reads nothing
    report(s[1], 20);
    report(s[2], 15);
    expect(cuts()).toEqual([[105], [], []]);
    expect(b.total).toBe(35); // the cut stream is forgotten
  });

  it('what a client read meanwhile counts: a reported total over the bound is read again before anyone is cut', () => {
    const { streams: s, report, cuts } = instance(2);
    report(s[0], 90);
    s[0].held = 0; // its client caught up; nothing reported that
    report(s[1], 50);
    expect(cuts()).toEqual([[], []]);
  });

  it('cuts as many as it takes, largest first, counting what grew unreported (the responder reports every write: one cut then suffices)', () => {
    const { b, streams: s, report, cuts } = instance(4);
    [s[0].held, s[1].held, s[2].held] = [50, 45, 40];
    report(s[3], 120);
    expect(cuts().map((c) => c.length)).toEqual([1, 0, 0, 1]);
    expect(b.total).toBe(85);
  });

  it('a closed stream no longer counts, and a report after its close is ignored', () => {
    const { b, streams: s, report, cuts } = instance(2);
    report(s[0], 90);
    b.close(s[0]);
    report(s[0], 95);
    report(s[1], 50);
    expect(cuts()).toEqual([[], []]);
    expect(b.total).toBe(50);
  });

  it('refuses a bound that is not a positive integer', () => {
    for (const bad of [0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY]) expect(() => new StreamBacklogs(bad)).toThrow(RangeError);
  });

  it('property: after any report the streams still open hold at most the bound together', () => {
    fc.assert(
      fc.property(fc.array(fc.record({ stream: fc.nat(7), held: fc.nat(60) }), { maxLength: 60 }), (reports) => {
        const { b, streams, report } = instance(8);
        for (const r of reports) {
          const s = streams[r.stream];
          if (s.cuts.length > 0) continue; // a cut stream's connection is closed: it writes no more
          report(s, r.held);
          expect(b.total).toBeLessThanOrEqual(100);
        }
      }),
    );
  });
});
