// Machine calibration for `npm run bench` (bench/README.md, "Machine dependence"): a few seconds
// of fixed work, measured in the calling process before anything else runs, so that a figure the
// bench prints on one machine can be read against what the same work costs on another.
//
//   compute:    a fixed pure-JS workload (JSON stringify/parse + sha256, and an integer loop), ms;
//   wake-ups:   strictly sequential ping-pong round trips of a small message with a child node
//               process over loopback TCP and a unix socket (each one a write that wakes a peer
//               sleeping in epoll, and back), and the same over TCP inside one process (no
//               sleeping peer) as the control, and (Linux, `taskset`) the TCP pair pinned to one
//               CPU and to two: latency, CPU of both ends, context switches per round trip;
//               then the TCP pair again with a pause between round trips (10 ms, as each process
//               sees a 100 req/s load; 50 ms, a quiet box), so both ends sleep before every
//               message: what a wake-up costs when nothing keeps the CPUs awake;
//   fdatasync:  one 8 kB write + fdatasync, median (the WAL flush of a commit, roughly).
import { execFileSync, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';

const ROUND_TRIPS = 3000;
const PINNED_ROUND_TRIPS = 1000; // the pinned pairs: the cross-CPU one is the slowest row
const WARMUP_ROUND_TRIPS = 200;
const MESSAGE_BYTES = 200;
const JSON_DOCS = 1000;
const INT_LOOP = 50_000_000;
const FSYNCS = 30;
/** The paced rows: pause between round trips, ms, and how many (about 1 and 2 s). */
const PACED = [
  { key: 'tcpPaced10ms', gapMs: 10, n: 100 },
  { key: 'tcpPaced50ms', gapMs: 50, n: 40 },
];

const CPU_KINDS = ['user', 'nice', 'system', 'idle', 'iowait', 'irq', 'softirq', 'steal'];

/**
 * CPU time of the whole box so far, in seconds of all CPUs, by kind (the `cpu` line of /proc/stat:
 * user, nice, system, idle, iowait, irq, softirq, steal); null where there is no /proc/stat.
 * `steal` is time a vCPU wanted to run and the hypervisor ran something else. `waitS`: seconds in
 * which at least one runnable task waited for a CPU (/proc/pressure/cpu, "some"), where the kernel
 * has pressure stall information.
 */
export function boxCpu(hz = 100) {
  try {
    const line = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
    const cpu = Object.fromEntries(CPU_KINDS.map((k, i) => [k, (line[i] ?? 0) / hz]));
    const waitS = cpuPressureSomeS();
    return waitS === null ? cpu : { ...cpu, waitS };
  } catch {
    return null;
  }
}

function cpuPressureSomeS() {
  try {
    const some = fs.readFileSync('/proc/pressure/cpu', 'utf8').match(/^some .*total=(\d+)/m);
    return some ? Number(some[1]) / 1e6 : null;
  } catch {
    return null;
  }
}

/**
 * Each kind's share of the box's CPU time between two boxCpu() readings, in %; with pressure
 * information, `cpuWait`: the share of the time in which some runnable task waited for a CPU.
 */
export function boxCpuShares(before, after) {
  if (!before || !after) return null;
  const d = Object.fromEntries(CPU_KINDS.map((k) => [k, after[k] - before[k]]));
  const total = Object.values(d).reduce((a, b) => a + b, 0);
  if (total <= 0) return null;
  const pct = Object.fromEntries(Object.entries(d).map(([k, v]) => [k, round((100 * v) / total, 1)]));
  const wallS = total / os.cpus().length;
  if (before.waitS !== undefined && after.waitS !== undefined) pct.cpuWait = round((100 * (after.waitS - before.waitS)) / wallS, 1);
  return pct;
}

/**
 * The fields of a /proc stat file (`/proc/<pid>/stat` or `/proc/<pid>/task/<tid>/stat`) after the
 * command name, which may itself hold spaces and parentheses: index 0 is the state, 7 `minflt`
 * (minor page faults, the whole process in a process's file), 11 `utime` and 12 `stime` (clock
 * ticks). Null where the file cannot be read (no /proc, or the process is gone).
 */
export function procStatFields(file) {
  let stat;
  try {
    stat = fs.readFileSync(file, 'utf8');
  } catch {
    return null;
  }
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
}

/**
 * A process's resident set now (VmRSS) and at its peak so far (VmHWM), in MB with one decimal, from
 * /proc/<pid>/status; null where there is no such file or figure (not Linux, the process gone, a
 * kernel thread).
 */
export function processMemoryMb(pid) {
  try {
    const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = (field) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN);
    const [rss, peak] = [kb('VmRSS'), kb('VmHWM')];
    // a kernel thread or a zombie has no VmRSS line: no figure rather than NaN
    return Number.isFinite(rss) && Number.isFinite(peak) ? { rss: round(rss / 1024, 1), peak: round(peak / 1024, 1) } : null;
  } catch {
    return null;
  }
}

/**
 * What the kernel says it runs on, read not measured: the kernel release, the hypervisor the guest
 * kernel detected at boot (`dmesg`, where it is readable; else only whether the CPU flags name
 * one), the clock source, and the meltdown line of the CPU vulnerabilities. These explain the
 * wake-up rows: on a PVM guest (a hypervisor that runs the guest kernel without hardware
 * virtualisation), page-table isolation is on even on AMD CPUs that do not need it, so every
 * syscall, interrupt and context switch swaps page tables through the host.
 */
export function platform() {
  const read = (file) => {
    try {
      return fs.readFileSync(file, 'utf8').trim();
    } catch {
      return null;
    }
  };
  let hypervisor = null;
  try {
    const boot = execFileSync('dmesg', { stdio: ['ignore', 'pipe', 'ignore'], maxBuffer: 64 << 20 }).toString();
    hypervisor = boot.match(/Hypervisor detected: (.+)/)?.[1].trim() ?? null;
  } catch {
    // dmesg restricted to root (kernel.dmesg_restrict) or absent
  }
  if (!hypervisor && /^flags\s*:.*\bhypervisor\b/m.test(read('/proc/cpuinfo') ?? '')) hypervisor = 'yes (dmesg not readable)';
  return {
    kernel: os.release(),
    hypervisor,
    clocksource: read('/sys/devices/system/clocksource/clocksource0/current_clocksource'),
    meltdown: read('/sys/devices/system/cpu/vulnerabilities/meltdown'),
  };
}

/** Runs every measurement (about 4–5 s) and returns the figures; `dir` holds the fsync file. */
export async function calibrateMachine({ dir = os.tmpdir() } = {}) {
  const t0 = performance.now();
  const box0 = boxCpu();
  const compute = {
    jsonSha256Ms: timed(jsonSha256, 3),
    intLoopMs: timed(intLoop, 3),
  };
  const echo = await startEcho();
  let wakeup;
  try {
    wakeup = {
      tcpCrossProcess: await roundTrips(() => net.connect(echo.tcpPort, '127.0.0.1'), echo.usage),
      unixCrossProcess: echo.unixPath ? await roundTrips(() => net.connect(echo.unixPath), echo.usage) : null,
      tcpSameProcess: await sameProcess(),
    };
    for (const { key, gapMs, n } of PACED)
      wakeup[key] = await roundTrips(() => net.connect(echo.tcpPort, '127.0.0.1'), echo.usage, n, gapMs);
  } finally {
    echo.stop();
  }
  // Where the scheduler puts the two ends decides whether a wake-up crosses CPUs (an IPI, on a VM
  // guest often an exit to the host); pinned, the same pair on one CPU and on two says which it is.
  if (hasTaskset()) {
    wakeup.tcpPinnedOneCpu = await pinnedPair(0, 0);
    if (os.cpus().length > 1) wakeup.tcpPinnedTwoCpus = await pinnedPair(0, 1);
  }
  return {
    compute,
    roundTrips: { messageBytes: MESSAGE_BYTES, ...wakeup },
    fdatasyncMs: fdatasync(dir),
    seconds: round((performance.now() - t0) / 1000, 2),
    boxCpuPct: boxCpuShares(box0, boxCpu()),
  };
}

/** The calibration as a table. */
export function reportMachine(machine, table) {
  const c = machine.calibration;
  console.log(`\nMachine: ${machine.cpus} × ${machine.model}, node ${machine.node}, load average ${machine.loadavg.join(' ')}`);
  const p = machine.platform;
  if (p)
    console.log(
      `platform: kernel ${p.kernel}, hypervisor ${p.hypervisor ?? 'none seen'}, clock source ${p.clocksource ?? '?'}, ` +
        `meltdown: ${p.meltdown ?? '?'}`,
    );
  if (!c) return;
  console.log(
    `compute (best of 3; median): JSON + sha256 of ${JSON_DOCS} docs ${c.compute.jsonSha256Ms.best} ms (${c.compute.jsonSha256Ms.median}); ` +
      `integer loop of ${INT_LOOP / 1e6}·10^6 ${c.compute.intLoopMs.best} ms (${c.compute.intLoopMs.median})`,
  );
  const rows = [
    [
      `round trip, ${c.roundTrips.messageBytes} B each way`,
      'n',
      'p50 µs',
      'p99 µs',
      'CPU µs/rt (user+sys)',
      'sys %',
      'vol. ctx sw/rt',
      'invol./rt',
    ],
  ];
  for (const [key, label] of [
    ['tcpCrossProcess', 'TCP loopback, two processes'],
    ['unixCrossProcess', 'unix socket, two processes'],
    ['tcpPinnedOneCpu', 'TCP loopback, two processes, both on CPU 0'],
    ['tcpPinnedTwoCpus', 'TCP loopback, two processes, CPUs 0 and 1'],
    ['tcpSameProcess', 'TCP loopback, one process (control)'],
    ...PACED.map(({ key, gapMs }) => [key, `TCP loopback, two processes, ${gapMs} ms pause before each`]),
  ]) {
    const r = c.roundTrips[key];
    if (!r) continue;
    rows.push([
      label,
      r.n,
      r.p50Us,
      r.p99Us,
      `${r.cpuUs} (${r.userUs}+${r.systemUs})`,
      r.cpuUs > 0 ? round((100 * r.systemUs) / r.cpuUs, 0) : '',
      r.voluntaryCtxSw ?? '',
      r.involuntaryCtxSw ?? '',
    ]);
  }
  console.log(table(rows, 1));
  console.log(`8 kB write + fdatasync: median ${c.fdatasyncMs ?? 'n/a'} ms; calibration took ${c.seconds} s`);
  if (c.boxCpuPct) console.log(`box CPU meanwhile (/proc/stat): ${shares(c.boxCpuPct)}`);
}

// ---------------------------------------------------------------- compute

function jsonSha256() {
  const doc = {
    id: 'calibration',
    items: Array.from({ length: 40 }, (_, i) => ({ i, name: `item-${i}`, price: i * 1.25, tags: ['a', 'bb', 'ccc'], ok: i % 2 === 0 })),
  };
  let digest = '';
  for (let k = 0; k < JSON_DOCS; k++) {
    const text = JSON.stringify({ ...doc, k, digest });
    digest = createHash('sha256')
      .update(JSON.stringify(JSON.parse(text).items[k % 40]))
      .update(text)
      .digest('hex');
  }
  return digest;
}

function intLoop() {
  let x = 0;
  for (let i = 0; i < INT_LOOP; i++) x = (Math.imul(x, 31) + i) | 0;
  return x;
}

/** Best and median of `n` timed calls, ms. */
function timed(fn, n) {
  const ms = [];
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    fn();
    ms.push(performance.now() - t);
  }
  ms.sort((a, b) => a - b);
  return { best: round(ms[0], 1), median: round(ms[Math.floor(n / 2)], 1) };
}

// ---------------------------------------------------------------- wake-ups

// The echo child: writes back whatever it reads, on a loopback TCP port and a unix socket; on each
// line of stdin it prints its own CPU and context switches (outside the measured round trips).
const ECHO_CHILD = `
const net = require('node:net');
const fs = require('node:fs');
const echo = (s) => { s.setNoDelay(true); s.on('data', (d) => s.write(d)); s.on('error', () => {}); };
const tcp = net.createServer(echo);
const unixPath = process.env.ECHO_UNIX_PATH;
const unix = unixPath ? net.createServer(echo) : null;
const ready = () => process.stdout.write(JSON.stringify({ tcpPort: tcp.address().port, unix: Boolean(unix) }) + '\\n');
tcp.listen(0, '127.0.0.1', () => {
  if (!unix) return ready();
  try { fs.rmSync(unixPath, { force: true }); } catch {}
  unix.on('error', () => { unix.close(); ready(); });
  unix.listen(unixPath, ready);
});
require('node:readline').createInterface({ input: process.stdin }).on('line', () => {
  const r = process.resourceUsage();
  process.stdout.write(JSON.stringify({ user: r.userCPUTime, system: r.systemCPUTime, vcsw: r.voluntaryContextSwitches, nvcsw: r.involuntaryContextSwitches }) + '\\n');
});
process.stdin.on('end', () => process.exit(0));
`;

/** The echo child, pinned to `cpu` when given (taskset). */
async function startEcho({ cpu } = {}) {
  const unixPath = process.platform === 'win32' ? null : path.join(os.tmpdir(), `bench-machine-${process.pid}.sock`);
  const command = cpu === undefined ? [process.execPath] : ['taskset', '-c', String(cpu), process.execPath];
  const child = spawn(command[0], [...command.slice(1), '-e', ECHO_CHILD], {
    env: { ...process.env, ECHO_UNIX_PATH: unixPath ?? '' },
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const lines = readline.createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const next = async () => {
    const { value, done } = await lines.next();
    if (done) throw new Error('the calibration echo child exited');
    return JSON.parse(value);
  };
  const hello = await next();
  return {
    tcpPort: hello.tcpPort,
    unixPath: hello.unix ? unixPath : null,
    async usage() {
      child.stdin.write('u\n');
      return next();
    },
    stop() {
      child.stdin.end();
      if (unixPath) fs.rmSync(unixPath, { force: true });
    },
  };
}

/** Own CPU (µs) and context switches of this process (all threads), as the child reports its own. */
function ownUsage() {
  const r = process.resourceUsage();
  return { user: r.userCPUTime, system: r.systemCPUTime, vcsw: r.voluntaryContextSwitches, nvcsw: r.involuntaryContextSwitches };
}

/**
 * Warm-up, then `n` sequential round trips on a fresh connection (`gapMs` apart, else back to
 * back): latency percentiles, and CPU and context switches per round trip summed over both ends
 * (`peerUsage` is the other end's usage, or null when it is this process).
 */
async function roundTrips(connect, peerUsage, n = ROUND_TRIPS, gapMs = 0) {
  const socket = connect();
  socket.setNoDelay(true);
  await new Promise((resolve, reject) => socket.once('connect', resolve).once('error', reject));
  try {
    await pingPong(socket, WARMUP_ROUND_TRIPS);
    const peerBefore = peerUsage ? await peerUsage() : null;
    const selfBefore = ownUsage();
    const us = await pingPong(socket, n, gapMs);
    const selfAfter = ownUsage();
    const peerAfter = peerUsage ? await peerUsage() : null;
    const d = (k) => selfAfter[k] - selfBefore[k] + (peerAfter ? peerAfter[k] - peerBefore[k] : 0);
    us.sort((a, b) => a - b);
    const pct = (p) => round(us[Math.min(us.length - 1, Math.ceil(p * us.length) - 1)], 1);
    const per = (x) => round(x / n, 2);
    return {
      n,
      p50Us: pct(0.5),
      p99Us: pct(0.99),
      cpuUs: per(d('user') + d('system')),
      userUs: per(d('user')),
      systemUs: per(d('system')),
      voluntaryCtxSw: per(d('vcsw')),
      involuntaryCtxSw: per(d('nvcsw')),
    };
  } finally {
    socket.destroy();
  }
}

/** The control: the echo server in this process, so no peer sleeps between the two writes. */
async function sameProcess() {
  const server = net.createServer((s) => {
    s.setNoDelay(true);
    s.on('data', (d) => s.write(d));
    s.on('error', () => undefined);
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    return await roundTrips(() => net.connect(server.address().port, '127.0.0.1'), null);
  } finally {
    server.close();
  }
}

/** `n` strictly sequential round trips of MESSAGE_BYTES, `gapMs` apart: each one's time in µs. */
function pingPong(socket, n, gapMs = 0) {
  const message = Buffer.alloc(MESSAGE_BYTES, 0x61);
  const us = new Array(n);
  return new Promise((resolve, reject) => {
    let i = 0;
    let received = 0;
    let t = 0n;
    const send = () => {
      t = process.hrtime.bigint();
      socket.write(message);
    };
    const onData = (chunk) => {
      received += chunk.length;
      if (received < MESSAGE_BYTES) return;
      received = 0;
      us[i++] = Number(process.hrtime.bigint() - t) / 1000;
      if (i < n) return gapMs > 0 ? void setTimeout(send, gapMs) : send();
      socket.off('data', onData).off('error', reject);
      resolve(us);
    };
    socket.on('data', onData).on('error', reject);
    send();
  });
}

function hasTaskset() {
  if (process.platform !== 'linux') return false;
  try {
    execFileSync('taskset', ['-c', '0', 'true'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/**
 * The TCP pair with both ends pinned: this module run again under `taskset -c <clientCpu>` (its
 * `--round-trips` mode below), with its echo child under `taskset -c <echoCpu>`. Null on failure.
 */
async function pinnedPair(clientCpu, echoCpu) {
  const child = spawn(
    'taskset',
    ['-c', String(clientCpu), process.execPath, fileURLToPath(import.meta.url), '--round-trips', String(echoCpu)],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  const code = await new Promise((resolve) => child.on('close', resolve).on('error', () => resolve(-1)));
  try {
    return code === 0 ? JSON.parse(out) : null;
  } catch {
    return null;
  }
}

/** `--round-trips <echoCpu>`: one TCP cross-process measurement, as JSON on stdout. */
async function roundTripsMain(echoCpu) {
  const echo = await startEcho({ cpu: echoCpu });
  try {
    process.stdout.write(
      JSON.stringify(await roundTrips(() => net.connect(echo.tcpPort, '127.0.0.1'), echo.usage, PINNED_ROUND_TRIPS)) + '\n',
    );
  } finally {
    echo.stop();
  }
}

// ---------------------------------------------------------------- fdatasync

function fdatasync(dir) {
  const file = path.join(dir, `bench-machine-${process.pid}.fsync`);
  const block = Buffer.alloc(8192, 0x62);
  try {
    fs.mkdirSync(dir, { recursive: true });
    const fd = fs.openSync(file, 'w');
    try {
      const ms = [];
      for (let i = 0; i < FSYNCS; i++) {
        const t = performance.now();
        fs.writeSync(fd, block, 0, block.length, i * block.length);
        fs.fdatasyncSync(fd);
        ms.push(performance.now() - t);
      }
      ms.sort((a, b) => a - b);
      return round(ms[Math.floor(FSYNCS / 2)], 3);
    } finally {
      fs.closeSync(fd);
      fs.rmSync(file, { force: true });
    }
  } catch {
    return null;
  }
}

/** "user 40 %, system 20 %, …, steal 3 %" of a boxCpuShares() result. */
export function shares(pct) {
  const kinds = ['user', 'system', 'softirq', 'iowait', 'steal', 'idle'].map((k) => `${k} ${pct[k]} %`).join(', ');
  return pct.cpuWait === undefined ? kinds : `${kinds}; some task waiting for a CPU ${pct.cpuWait} % of the time (/proc/pressure/cpu)`;
}

/** `n` rounded to `d` decimals: the benches' one rounding for printed figures. */
export function round(n, d) {
  return Math.round(n * 10 ** d) / 10 ** d;
}

// No top-level await: bench/settlement.ts loads this module with require() (Node ≥ 20.19).
if (process.argv[1] === fileURLToPath(import.meta.url) && process.argv[2] === '--round-trips') {
  roundTripsMain(process.argv[3]).catch((err) => {
    console.error(err);
    process.exit(1);
  });
}
