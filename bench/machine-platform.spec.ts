import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import { callScriptModule } from './script-module';

/**
 * The platform line of the bench's machine calibration (scripts/machine.mjs, `platform`), read in a
 * child node (the module is ESM) and checked against the same sources read here.
 */
const readOrNull = (file: string): string | null => {
  try {
    return fs.readFileSync(file, 'utf8').trim();
  } catch {
    return null;
  }
};

describe('machine platform', () => {
  const p = callScriptModule<{ kernel: string; hypervisor: string | null; clocksource: string | null; meltdown: string | null }>(
    "import { platform } from './scripts/machine.mjs'; console.log(JSON.stringify(platform()));",
  );

  it('names the kernel, the clock source and the meltdown mitigation as the kernel reports them', () => {
    expect(p.kernel).toBe(os.release());
    expect(p.clocksource).toBe(readOrNull('/sys/devices/system/clocksource/clocksource0/current_clocksource'));
    expect(p.meltdown).toBe(readOrNull('/sys/devices/system/cpu/vulnerabilities/meltdown'));
  });

  it('names the hypervisor from dmesg where readable, else says only whether the CPU flags show one', () => {
    let boot: string | null = null;
    try {
      boot = execFileSync('dmesg', { stdio: ['ignore', 'pipe', 'ignore'], maxBuffer: 64 << 20 }).toString();
    } catch {
      boot = null;
    }
    const detected = boot?.match(/Hypervisor detected: (.+)/)?.[1].trim();
    const flagged = /^flags\s*:.*\bhypervisor\b/m.test(readOrNull('/proc/cpuinfo') ?? '');
    if (detected) expect(p.hypervisor).toBe(detected);
    else expect(p.hypervisor).toBe(flagged ? 'yes (dmesg not readable)' : null);
  });
});

describe('procStatFields', () => {
  // A child whose command name holds ") " and spaces: the fields after it must not shift.
  const script =
    "process.title = 'x) y (z'; import('./scripts/machine.mjs').then(({ procStatFields }) => {" +
    '  const f = procStatFields(`/proc/${process.pid}/stat`);' +
    '  console.log(JSON.stringify({ f, faults: process.resourceUsage().minorPageFault, missing: procStatFields("/proc/0/nope") }));' +
    '});';

  it('returns the fields after the command name (state first, minflt at 7), whatever the name holds; null for no file', () => {
    const out = callScriptModule<{ f: string[]; faults: number; missing: null }>(script);
    expect(out.f[0]).toMatch(/^[RSD]$/);
    // minflt was read just before resourceUsage: the same counter, a few faults apart at most
    expect(Number(out.f[7])).toBeGreaterThan(0);
    expect(Math.abs(Number(out.f[7]) - out.faults)).toBeLessThan(500);
    expect(Number(out.f[11]) + Number(out.f[12])).toBeGreaterThanOrEqual(0);
    expect(out.missing).toBeNull();
  });
});
