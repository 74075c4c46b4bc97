import fc from 'fast-check';
import { QueueShedder, SHED_LAW_DEFAULTS, ShedLaw } from './queue-shedder';

const law: ShedLaw = { ...SHED_LAW_DEFAULTS, targetMs: 100, windowMs: 250 };

/** `n` replies spread over the window starting at `t`, each having waited `waitMs`. */
function window(s: QueueShedder, t: number, n: number, waitMs: number | ((i: number) => number)): void {
  for (let i = 0; i < n; i += 1) s.observe(typeof waitMs === 'number' ? waitMs : waitMs(i), t + (i * law.windowMs) / (n + 1));
}

describe('QueueShedder', () => {
  it('refuses nothing until a window with enough replies waited above the target', () => {
    const s = new QueueShedder(law);
    expect(s.refuses(0, 0)).toBe(false);
    window(s, 0, 50, 90); // below the target
    window(s, 250, 7, 5_000); // far above, but too few replies to count
    expect(s.shareAt(500)).toBe(0);
    expect(s.refuses(500, 0)).toBe(false);
  });

  it('from the second window above the target in a row, raises the share by a step at twice the target, four at most', () => {
    const s = new QueueShedder(law);
    s.shareAt(0);
    window(s, 0, 8, 200);
    expect(s.shareAt(250)).toBe(0); // one window: perhaps the late replies of a backlog that has cleared
    window(s, 250, 8, 200);
    expect(s.shareAt(500)).toBeCloseTo(0.05, 10);
    window(s, 500, 8, 100_000);
    expect(s.shareAt(750)).toBeCloseTo(0.25, 10);
    expect(s.refuses(750, 0.249)).toBe(true);
    expect(s.refuses(750, 0.25)).toBe(false);
  });

  it('a burst of late replies in one window, then quick ones, refuses nothing', () => {
    const s = new QueueShedder(law);
    s.shareAt(0);
    window(s, 0, 30, 6_000); // a dispatcher stalled 6 s, then caught up at once
    window(s, 250, 8, 5);
    window(s, 500, 30, 6_000); // and again, after a quiet window
    expect(s.shareAt(750)).toBe(0);
    s.shareAt(1_250); // an empty window between bursts breaks the run too
    window(s, 1_250, 30, 6_000);
    expect(s.shareAt(1_500)).toBe(0);
  });

  it('reads the smallest wait of a window: one slow reply among quick ones is not a queue', () => {
    const s = new QueueShedder(law);
    s.shareAt(0);
    window(s, 0, 20, (i) => (i === 3 ? 10_000 : 20));
    expect(s.shareAt(250)).toBe(0);
  });

  it('comes back to refusing nothing once the queue is gone, or when replies stop coming', () => {
    const s = new QueueShedder(law);
    s.shareAt(0);
    for (let w = 0; w < 10; w += 1) window(s, w * 250, 30, 1_000);
    expect(s.shareAt(2_500)).toBe(law.maxShare);
    // the queue drained: quick replies take the share down a step per window
    window(s, 2_500, 30, 0);
    expect(s.shareAt(2_750)).toBeCloseTo(law.maxShare - law.step, 10);
    // then no replies at all for 18 windows (4.5 s): every empty window is a step down
    expect(s.shareAt(2_750 + 18 * 250)).toBe(0);
    expect(s.refuses(2_750 + 18 * 250, 0)).toBe(false);
  });

  it('a target of 0 turns it off', () => {
    const s = new QueueShedder({ ...law, targetMs: 0 });
    for (let w = 0; w < 10; w += 1) window(s, w * 250, 30, 60_000);
    expect(s.enabled).toBe(false);
    expect(s.refuses(5_000, 0)).toBe(false);
    expect(s.shareAt(5_000)).toBe(0);
  });

  it('any sequence of replies and requests keeps the share within [0, maxShare], and refuses only below it', () => {
    const event = fc.oneof(
      fc.record({ kind: fc.constant('reply' as const), dt: fc.nat(400), wait: fc.oneof(fc.double({ noNaN: false }), fc.nat(120_000)) }),
      fc.record({
        kind: fc.constant('request' as const),
        dt: fc.nat(400),
        draw: fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }),
      }),
    );
    fc.assert(
      fc.property(fc.array(event, { maxLength: 400 }), (events) => {
        const s = new QueueShedder(law);
        let t = 0;
        for (const e of events) {
          t += e.dt;
          if (e.kind === 'reply') s.observe(e.wait, t);
          else {
            const share = s.shareAt(t);
            expect(share).toBeGreaterThanOrEqual(0);
            expect(share).toBeLessThanOrEqual(law.maxShare);
            expect(s.refuses(t, e.draw)).toBe(e.draw < share);
          }
        }
      }),
    );
  });

  it('a queue that stands keeps raising the share, whatever the draws', () => {
    fc.assert(
      fc.property(fc.integer({ min: 201, max: 600_000 }), fc.integer({ min: 8, max: 200 }), (wait, n) => {
        const s = new QueueShedder(law);
        s.shareAt(0);
        window(s, 0, n, wait);
        let last = s.shareAt(250);
        for (let w = 1; w < 6; w += 1) {
          window(s, w * 250, n, wait);
          const share = s.shareAt((w + 1) * 250);
          expect(share).toBeGreaterThan(last);
          last = share;
        }
      }),
    );
  });
});
