import { IdleBackoff } from './idle-backoff';

describe('IdleBackoff', () => {
  it('doubles the wait after each empty run once the grace period has passed, up to the maximum', () => {
    let now = 0;
    const b = new IdleBackoff({ baseMs: 1000, maxMs: 8000, graceMs: 3000, now: () => now });
    const waits: number[] = [];
    for (let i = 0; i < 8; i++) {
      const wait = b.next(false);
      waits.push(wait);
      now += wait;
    }
    expect(waits).toEqual([1000, 1000, 1000, 2000, 4000, 8000, 8000, 8000]);
  });

  it('goes back to the base wait on work found by a run, and on work signalled from outside', () => {
    let now = 0;
    const b = new IdleBackoff({ baseMs: 1000, maxMs: 30_000, now: () => now });
    now += 1;
    expect([b.next(false), b.next(false), b.next(false)]).toEqual([2000, 4000, 8000]);
    expect(b.next(true)).toBe(1000);
    expect(b.reset()).toBe(false);
    now += 1;
    b.next(false);
    expect(b.reset()).toBe(true);
    expect(b.next(false)).toBe(2000);
  });

  it('never backs off when the maximum is not above the base', () => {
    let now = 0;
    const b = new IdleBackoff({ baseMs: 5000, maxMs: 5000, now: () => now });
    for (let i = 0; i < 5; i++) {
      now += 5000;
      expect(b.next(false)).toBe(5000);
    }
  });
});
