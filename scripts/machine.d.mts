// Types of what TypeScript benches use from scripts/machine.mjs.
export type BoxCpu = Record<'user' | 'nice' | 'system' | 'idle' | 'iowait' | 'irq' | 'softirq' | 'steal', number>;
export function boxCpu(hz?: number): BoxCpu | null;
export function boxCpuShares(before: BoxCpu | null, after: BoxCpu | null): BoxCpu | null;
export function shares(pct: BoxCpu): string;
