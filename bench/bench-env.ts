// Small helpers the benches share: their knobs from the environment and a process's CPU from /proc.
import { procStatFields } from '../scripts/machine.mjs';

/** A positive number from the environment, or `fallback` when unset. */
export const num = (name: string, fallback: number): number => {
  const raw = process.env[name];
  const n = raw === undefined || raw === '' ? fallback : Number(raw);
  if (!Number.isFinite(n) || n <= 0) throw new Error(`${name} must be a positive number, got ${raw}`);
  return n;
};

export function required(name: string): string {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is required`);
  return v;
}

/**
 * User + system CPU of a process so far (all its threads), or with `mainThread` of its main thread
 * alone (a node process's event loop: the rest are V8's compiler and GC helpers), from /proc
 * (Linux); throws when there is no such process here.
 */
export function cpuMs(pid: number, opts: { mainThread?: boolean } = {}): number {
  const fields = statOf(opts.mainThread ? `/proc/${pid}/task/${pid}/stat` : `/proc/${pid}/stat`);
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100;
}

/**
 * Minor page faults of a process so far, all threads (/proc/<pid>/stat `minflt`): each is a page
 * the kernel mapped on first touch, 10–15 µs apiece on a PVM guest (bench/README.md, "platform").
 */
export function minorFaults(pid: number): number {
  return Number(statOf(`/proc/${pid}/stat`)[7]);
}

function statOf(file: string): string[] {
  const fields = procStatFields(file);
  if (!fields) throw new Error(`cannot read ${file}`);
  return fields;
}
