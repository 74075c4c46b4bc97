import { LogBurst } from './log-burst';

describe('LogBurst', () => {
  let now = 1_000;
  const lines: Array<[Record<string, unknown>, string]> = [];
  const burst = () =>
    new LogBurst(
      (f, m) => lines.push([f, m]),
      'refused',
      10_000,
      () => now,
    );

  beforeEach(() => {
    now = 1_000;
    lines.length = 0;
    jest.useFakeTimers();
  });
  afterEach(() => jest.useRealTimers());

  it('logs the first occurrence in full and nothing more while nothing else comes', () => {
    const b = burst();
    b.note({ id: 'a' });
    jest.advanceTimersByTime(60_000);
    b.flush();
    expect(lines).toEqual([[{ id: 'a' }, 'refused']]);
  });

  it('counts the rest of the window and writes their number, with the last one, when the window ends', () => {
    const b = burst();
    for (let i = 0; i < 1000; i += 1) b.note({ id: `e${i}` });
    expect(lines).toHaveLength(1);
    jest.advanceTimersByTime(9_999);
    expect(lines).toHaveLength(1);
    jest.advanceTimersByTime(1);
    expect(lines[1]).toEqual([{ id: 'e999', more: 999, window_ms: 10_000 }, expect.stringMatching(/^refused: 999 more within 10 s/)]);
    // one summary per window: nothing is written twice
    b.flush();
    jest.advanceTimersByTime(60_000);
    expect(lines).toHaveLength(2);
  });

  it('opens a new window with a full line once the old one is over, after writing what the old one counted', () => {
    const b = burst();
    b.note({ id: 'a' });
    now += 5_000;
    b.note({ id: 'b' });
    now += 5_000; // the window's end, before its timer ran
    b.note({ id: 'c' });
    expect(lines.map(([f]) => f)).toEqual([{ id: 'a' }, { id: 'b', more: 1, window_ms: 10_000 }, { id: 'c' }]);
    jest.runAllTimers();
    expect(lines).toHaveLength(3);
  });

  it('flush writes what is pending at once (a stopping service), and the timer then writes nothing', () => {
    const b = burst();
    b.note({ id: 'a' });
    b.note({ id: 'b' });
    b.flush();
    jest.runAllTimers();
    expect(lines.map(([f]) => f)).toEqual([{ id: 'a' }, { id: 'b', more: 1, window_ms: 10_000 }]);
  });

  it("a field named like the summary's own does not hide the count", () => {
    const b = burst();
    b.note({ more: 'x' });
    b.note({ more: 'y', window_ms: 'z' });
    b.flush();
    expect(lines[1][0]).toEqual({ more: 1, window_ms: 10_000 });
  });

  it.each([0, -1, NaN, Infinity])('refuses a window of %p ms', (w) => {
    expect(() => new LogBurst(() => undefined, 'x', w)).toThrow(/positive number of ms/);
  });
});
