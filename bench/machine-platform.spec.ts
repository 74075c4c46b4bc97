import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/**
 * The platform line of the bench's machine calibration (scripts/machine.mjs, `platform`), read in a
 * child node (the module is ESM) and checked against the same sources read here.
 */
const ROOT = path.resolve(__dirname, '..');
const readOrNull = (file: string): string | null => {
  try {
    return fs.readFileSync(file, 'utf8').trim();
  } catch {
    return null;
  }
};

describe('machine platform', () => {
  const p = JSON.parse(
    execFileSync(
      process.execPath,
      ['--input-type=module', '-e', "import { platform } from './scripts/machine.mjs'; console.log(JSON.stringify(platform()));"],
      { cwd: ROOT, encoding: 'utf8' },
    ),
  ) as { kernel: string; hypervisor: string | null; clocksource: string | null; meltdown: string | null };

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
