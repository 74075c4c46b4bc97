// The arithmetic of bench:settlement's counted window (bench/README.md, "Settlement"): cores used
// between two progress polls, from CPU readings in ms and the box's CPU by kind. Pure, so the
// figures the bench prints are pinned by bench/counted-window.spec.ts.
import os from 'node:os';
import type { BoxCpu } from '../scripts/machine.mjs';

/**
 * The counted window's CPU in cores (CPU seconds per second of the window): the whole box busy
 * (all but idle, iowait and steal), the settlement process and its main thread (the event loop;
 * the rest of the process is V8's GC and compiler helpers), its Postgres backends, the broker,
 * and whatever else ran (Postgres's own background processes and other backends, this bench, the
 * kernel, other daemons), and how often a runnable task waited for a CPU. Whether the box or the
 * instance's one thread bounds events/s: a main thread near 1.0 core is the thread; a box near all
 * its cores, or busy enough that tasks queue for a CPU much of the time, is the box.
 */
export interface CountedWindow {
  wallMs: number;
  /** ledger rows committed between the window's two polls */
  committed: number;
  cores: number;
  boxBusy: number;
  settlement: number;
  mainThread: number;
  backends: number | null;
  broker: number | null;
  rest: number;
  /** % of the window in which some runnable task waited for a CPU (/proc/pressure/cpu; null without it) */
  cpuWaitPct: number | null;
  /** CPU ms of settlement, its backends and the broker per row committed in the window (null without all three or without rows) */
  cpuMsPerRow: number | null;
}

/** CPU so far, in ms, of what the counted window splits the box into, at one poll. */
export interface Snapshot {
  at: number;
  /** ledger rows committed so far in the phase */
  rows: number;
  box: BoxCpu | null;
  settlement: number;
  mainThread: number;
  backends: number | null;
  broker: number | null;
}

/** Cores used between two polls of the counted window (null without /proc/stat or with no time between them). */
export function countedWindow(a: Snapshot, b: Snapshot, cores = os.cpus().length): CountedWindow | null {
  const wallMs = b.at - a.at;
  if (!a.box || !b.box || wallMs <= 0) return null;
  const busyMs = (box: BoxCpu) => (box.user + box.nice + box.system + box.irq + box.softirq) * 1000;
  const perWall = (ms: number) => Number((ms / wallMs).toFixed(2));
  const diff = (x: number | null, y: number | null) => (x === null || y === null ? null : perWall(y - x));
  const committed = b.rows - a.rows;
  const allMs =
    a.backends === null || b.backends === null || a.broker === null || b.broker === null
      ? null
      : b.settlement - a.settlement + (b.backends - a.backends) + (b.broker - a.broker);
  const w: CountedWindow = {
    wallMs,
    committed,
    cores,
    boxBusy: perWall(busyMs(b.box) - busyMs(a.box)),
    settlement: perWall(b.settlement - a.settlement),
    mainThread: perWall(b.mainThread - a.mainThread),
    backends: diff(a.backends, b.backends),
    broker: diff(a.broker, b.broker),
    rest: 0,
    cpuWaitPct:
      a.box.waitS === undefined || b.box.waitS === undefined
        ? null
        : Number(((100 * (b.box.waitS - a.box.waitS) * 1000) / wallMs).toFixed(1)),
    cpuMsPerRow: allMs === null || committed <= 0 ? null : Number((allMs / committed).toFixed(4)),
  };
  w.rest = Number(Math.max(0, w.boxBusy - w.settlement - (w.backends ?? 0) - (w.broker ?? 0)).toFixed(2));
  return w;
}

/** CPU of settlement, its backends and the broker per ledger row committed in a round's counted window. */
export function perRow(w: CountedWindow | null): number | null {
  return w?.cpuMsPerRow ?? null;
}
