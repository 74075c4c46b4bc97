import type { BoxCpu } from '../scripts/machine.mjs';
import { countedWindow, perRow, Snapshot } from './counted-window';

const box = (busyS: number, idleS: number, waitS?: number): BoxCpu => ({
  user: busyS,
  nice: 0,
  system: 0,
  idle: idleS,
  iowait: 0,
  irq: 0,
  softirq: 0,
  steal: 0,
  ...(waitS === undefined ? {} : { waitS }),
});

const at = (ms: number, s: Partial<Snapshot> = {}): Snapshot => ({
  at: ms,
  rows: 0,
  box: box(0, 0, 0),
  settlement: 0,
  mainThread: 0,
  backends: 0,
  broker: 0,
  ...s,
});

describe('countedWindow', () => {
  it('turns CPU ms between two polls into cores of the window, and the rest of the box into "rest"', () => {
    // 2 s of wall: the box 3.2 busy CPU seconds, settlement 1,600 ms (main thread 1,200), backends 1,200, broker 200
    const w = countedWindow(
      at(1_000, { rows: 10_000, box: box(10, 5, 1), settlement: 500, mainThread: 400, backends: 100, broker: 50 }),
      at(3_000, { rows: 24_000, box: box(13.2, 5.8, 2.2), settlement: 2_100, mainThread: 1_600, backends: 1_300, broker: 250 }),
      2,
    );
    expect(w).toEqual({
      wallMs: 2_000,
      committed: 14_000,
      cores: 2,
      boxBusy: 1.6,
      settlement: 0.8,
      mainThread: 0.6,
      backends: 0.6,
      broker: 0.1,
      rest: 0.1,
      cpuWaitPct: 60,
      // (1,600 + 1,200 + 200) ms over 14,000 rows
      cpuMsPerRow: 0.2143,
    });
    expect(perRow(w)).toBe(0.2143);
  });

  it('leaves out what it cannot read instead of counting it as zero', () => {
    const w = countedWindow(at(0, { backends: null, box: box(1, 1) }), at(1_000, { rows: 500, backends: null, box: box(2, 1) }), 2);
    expect(w?.backends).toBeNull();
    expect(w?.cpuWaitPct).toBeNull();
    expect(perRow(w)).toBeNull();
  });

  it('gives no window for one poll, no /proc/stat, or no rows to divide by', () => {
    expect(countedWindow(at(5), at(5), 2)).toBeNull();
    expect(countedWindow(at(0, { box: null }), at(1_000), 2)).toBeNull();
    expect(perRow(countedWindow(at(0), at(1_000, { settlement: 10 }), 2))).toBeNull();
    expect(perRow(null)).toBeNull();
  });
});
