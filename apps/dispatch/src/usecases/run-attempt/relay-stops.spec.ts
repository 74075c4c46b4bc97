import fc from 'fast-check';
import { RelayStops } from './relay-stops';

describe('RelayStops', () => {
  it('holds a stop until its time is up, then not', () => {
    const stops = new RelayStops(1_000, 10);
    stops.stop('a', 0);
    expect(stops.stopped('a', 999)).toBe(true);
    expect(stops.stopped('a', 1_000)).toBe(false);
    expect(stops.stopped('b', 0)).toBe(false);
  });

  it('forgets a stop once its stream ended', () => {
    const stops = new RelayStops(1_000, 10);
    stops.stop('a', 0);
    stops.forget('a');
    expect(stops.stopped('a', 1)).toBe(false);
    expect(stops.size).toBe(0);
  });

  it('a stop heard again lives from the second time', () => {
    const stops = new RelayStops(1_000, 10);
    stops.stop('a', 0);
    stops.stop('b', 500);
    stops.stop('a', 900);
    stops.stop('c', 1_600); // b (until 1,500) expired: pruned; a (until 1,900) stays
    expect([stops.stopped('a', 1_600), stops.stopped('b', 1_600), stops.size]).toEqual([true, false, 2]);
  });

  it('never holds more than its bound, and the newest stop always holds, whatever arrives', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.constantFrom('a', 'b', 'c', 'd', 'e', 'f', 'g'), fc.nat(500)), { maxLength: 200 }), (arrivals) => {
        const stops = new RelayStops(1_000, 4);
        let now = 0;
        for (const [id, gap] of arrivals) {
          now += gap;
          stops.stop(id, now);
          if (stops.size > 4 || !stops.stopped(id, now)) return false;
        }
        return true;
      }),
    );
  });
});
