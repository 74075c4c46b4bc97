import { callScriptModule } from './script-module';

/**
 * The soak's measurements (scripts/soak.mjs): a window's heap trough per service, a process's heap
 * after a full collection, and its growth per answer served.
 */
const troughs = (samples: unknown[], field?: string) =>
  callScriptModule<Record<string, number>>(
    "import { troughs } from './scripts/soak.mjs'; const [s, f] = JSON.parse(process.argv[1]); console.log(JSON.stringify(troughs(s, f ?? undefined)));",
    [samples, field ?? null],
  );
const growth = (startMb: unknown, endMb: unknown, answers: number, rate: number) =>
  callScriptModule<{ kbPer1000Answers: number; mbPerDay: number } | null>(
    "import { fullGcGrowth } from './scripts/soak.mjs'; const a = JSON.parse(process.argv[1]); console.log(JSON.stringify(fullGcGrowth(...a)));",
    [startMb, endMb, answers, rate],
  );

describe('soak arithmetic', () => {
  it('takes the lowest sample per service, skipping samples and services without the figure', () => {
    const samples = [
      { admission: { heapUsed: 40, rss: 150 }, kafka: { rss: 400 } },
      { admission: { heapUsed: 31.5, rss: 151 }, dispatch: { heapUsed: 20 } },
      null,
      { admission: { heapUsed: 38 }, dispatch: { heapUsed: null } },
    ];
    expect(troughs(samples)).toEqual({ admission: 31.5, dispatch: 20 });
    expect(troughs(samples, 'rss')).toEqual({ admission: 150, kafka: 400 });
  });

  it('a heap that keeps 2 KB per answer: 2,000 KB per 1,000 answers, and what that is in a day at the rate', () => {
    const g = growth(30, 30 + (60_000 * 2) / 1024, 60_000, 100)!;
    expect(g.kbPer1000Answers).toBeCloseTo(2000, 6);
    expect(g.mbPerDay).toBeCloseTo((2 / 1024) * 100 * 86_400, 0); // 16,875 MB a day
  });

  it('a heap that shrank: a negative growth; nothing without both figures or without answers', () => {
    expect(growth(50, 49, 10_000, 100)!.kbPer1000Answers).toBeCloseTo(-102.4, 6);
    expect(growth(null, 49, 10_000, 100)).toBeNull();
    expect(growth(50, undefined, 10_000, 100)).toBeNull();
    expect(growth(50, 51, 0, 100)).toBeNull();
  });

  it("reads a live process's heap after a full collection through its inspector, and frees the port for the next", () => {
    const out = callScriptModule<{ mb: number[] }>(
      "import { spawn } from 'node:child_process'; import { heapAfterFullGc } from './scripts/soak.mjs';" +
        // a process holding ~40 MB that stays reachable, and making garbage all the time
        "const child = spawn(process.execPath, ['-e', \"globalThis.keep = Array.from({ length: 200000 }, (_, i) => ({ i, s: 'x'.repeat(80) + i })); setInterval(() => JSON.stringify({ a: Math.random() }), 5); console.log('ready')\"], { stdio: ['ignore', 'pipe', 'ignore'] });" +
        "await new Promise((r) => child.stdout.once('data', r));" +
        'try { const mb = [await heapAfterFullGc(child.pid), await heapAfterFullGc(child.pid)]; console.log(JSON.stringify({ mb })); } finally { child.kill(); }',
    );
    for (const mb of out.mb) {
      expect(mb).toBeGreaterThan(30);
      expect(mb).toBeLessThan(120);
    }
    expect(Math.abs(out.mb[0] - out.mb[1])).toBeLessThan(2); // the garbage between them does not count
  });
});
