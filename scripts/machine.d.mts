// Types of what TypeScript benches use from scripts/machine.mjs.
export type BoxCpu = Record<'user' | 'nice' | 'system' | 'idle' | 'iowait' | 'irq' | 'softirq' | 'steal', number> & {
  /** boxCpu: seconds some runnable task waited for a CPU; boxCpuShares: that share of the time, % as `cpuWait` */
  waitS?: number;
  cpuWait?: number;
};
export function boxCpu(hz?: number): BoxCpu | null;
export function boxCpuShares(before: BoxCpu | null, after: BoxCpu | null): BoxCpu | null;
export function shares(pct: BoxCpu): string;
export function round(n: number, d: number): number;
export function procStatFields(file: string): string[] | null;
export function processMemoryMb(pid: number): { rss: number; peak: number } | null;
