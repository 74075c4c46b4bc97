import { PeriodicJob } from './periodic-job';

describe('PeriodicJob', () => {
  it('runs one at a time: a tick during a run joins it instead of starting another', async () => {
    let runs = 0;
    let release!: () => void;
    const job = new PeriodicJob(
      0,
      () => {
        runs += 1;
        return runs === 1 ? new Promise<void>((r) => (release = r)) : Promise.resolve();
      },
      () => undefined,
    );
    const first = job.tick();
    const second = job.tick();
    expect(runs).toBe(1);
    release();
    await Promise.all([first, second]);
    await job.tick();
    expect(runs).toBe(2);
  });

  it('hands a failure to onError and runs again next time', async () => {
    const errors: string[] = [];
    let fail = true;
    const job = new PeriodicJob(
      0,
      async () => {
        if (fail) throw new Error('database unavailable');
      },
      (e) => errors.push(e.message),
    );
    await job.tick();
    fail = false;
    await job.tick();
    expect(errors).toEqual(['database unavailable']);
  });

  it('never starts a timer for an interval of 0, and stop waits for the run in progress', async () => {
    jest.useFakeTimers();
    try {
      let runs = 0;
      const job = new PeriodicJob(
        0,
        async () => void (runs += 1),
        () => undefined,
      );
      job.start();
      await jest.advanceTimersByTimeAsync(60_000);
      expect(runs).toBe(0);
      const ticking = new PeriodicJob(
        1000,
        async () => void (runs += 1),
        () => undefined,
      );
      ticking.start();
      await jest.advanceTimersByTimeAsync(3000);
      await ticking.stop();
      await jest.advanceTimersByTimeAsync(3000);
      expect(runs).toBe(3);
    } finally {
      jest.useRealTimers();
    }
  });

  it('backs off while runs find nothing, back to the interval after a run that did work or failed', async () => {
    jest.useFakeTimers();
    try {
      const at: number[] = [];
      const outcomes: Array<boolean | Error> = [false, false, false, true, false, new Error('down'), false];
      const errors: string[] = [];
      const job = new PeriodicJob(
        1000,
        async () => {
          at.push(Date.now());
          const next = outcomes.shift() ?? false;
          if (next instanceof Error) throw next;
          return next;
        },
        (e) => errors.push(e.message),
        { idleMaxMs: 4000 },
      );
      const t0 = Date.now();
      job.start();
      await jest.advanceTimersByTimeAsync(21_000);
      await job.stop();
      // gaps: the first run after 1 s; then 2, 4, 4 after empty runs; 1 after work; 2 after an
      // empty one; 1 after the failure; then backing off again
      expect(at.map((t, i) => t - (i === 0 ? t0 : at[i - 1]))).toEqual([1000, 2000, 4000, 4000, 1000, 2000, 1000, 2000, 4000]);
      expect(errors).toEqual(['down']);
    } finally {
      jest.useRealTimers();
    }
  });
});
