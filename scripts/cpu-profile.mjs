#!/usr/bin/env node
// Summarises a V8 CPU profile written with GATEWAY_CPU_PROFILE_DIR (one per service):
//   node scripts/cpu-profile.mjs <file.cpuprofile> [--skip-s 40] [--until-s 50] [--top 30] [--timeline]
// prints busy samples by module (self and inclusive: node_modules package, apps/<x>, libs/<x>,
// node:<module>, or a V8 pseudo-frame such as "(garbage collector)") and the top functions by
// self time. --skip-s drops the samples of the first seconds (start-up, warm-up), --until-s those
// after that second; --timeline prints the busy share of each second first, to find a phase.
import fs from 'node:fs';

const args = process.argv.slice(2);
const file = args.find((a) => !a.startsWith('--') && !/^\d+$/.test(a));
const opt = (name, fallback) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? Number(args[i + 1]) : fallback;
};
if (!file) {
  console.error('usage: node scripts/cpu-profile.mjs <file.cpuprofile> [--skip-s N] [--until-s N] [--top N] [--timeline]');
  process.exit(2);
}
const skipS = opt('skip-s', 0);
const untilS = opt('until-s', Infinity);
const top = opt('top', 30);

const profile = JSON.parse(fs.readFileSync(file, 'utf8'));
const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const parent = new Map();
for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);

function moduleOf({ url, functionName }) {
  if (!url) return functionName.startsWith('(') ? functionName : '(native)';
  const pkg = url.match(/node_modules\/((@[^/]+\/)?[^/]+)/);
  if (pkg) return pkg[1];
  if (url.startsWith('node:')) return url.slice(5).split('/')[0] === 'internal' ? 'node:internal' : url.split('/')[0];
  const own = url.match(/\/(apps|libs|scripts|bench)\/([^/]+)\//);
  return own ? `${own[1]}/${own[2]}` : url;
}
const functionOf = ({ url, functionName, lineNumber }) =>
  `${functionName || '(anonymous)'} ${url.replace(/.*node_modules\//, '').replace(/^file:\/\/.*?\/(apps|libs)\//, '$1/')}:${lineNumber + 1}`;

const selfModule = new Map();
const selfFunction = new Map();
const inclusiveModule = new Map();
const add = (m, k, n = 1) => m.set(k, (m.get(k) ?? 0) + n);
let t = profile.startTime;
const from = profile.startTime + skipS * 1e6;
const until = profile.startTime + untilS * 1e6;
const perSecond = new Map();
let busy = 0;
for (let i = 0; i < profile.samples.length; i++) {
  t += profile.timeDeltas[i];
  const leaf = byId.get(profile.samples[i]);
  const second = Math.floor((t - profile.startTime) / 1e6);
  const s = perSecond.get(second) ?? { all: 0, busy: 0 };
  s.all++;
  if (t < from || t > until) {
    perSecond.set(second, s);
    continue;
  }
  if (leaf.callFrame.functionName === '(idle)') {
    perSecond.set(second, s);
    continue;
  }
  s.busy++;
  perSecond.set(second, s);
  busy++;
  add(selfModule, moduleOf(leaf.callFrame));
  add(selfFunction, functionOf(leaf.callFrame));
  const seen = new Set();
  for (let id = leaf.id; id !== undefined; id = parent.get(id)) seen.add(moduleOf(byId.get(id).callFrame));
  seen.delete('(root)');
  for (const m of seen) add(inclusiveModule, m);
}

const ms = ((profile.endTime - profile.startTime) / profile.samples.length / 1000).toFixed(2);
if (args.includes('--timeline')) {
  console.log('busy share per second of the profile (window applied):');
  console.log([...perSecond].map(([sec, v]) => `${sec}:${Math.round((100 * v.busy) / v.all)}`).join(' '));
}
console.log(`${file}: ${busy} busy samples from second ${skipS} to ${untilS} (one every ~${ms} ms)`);
for (const [title, map] of [
  ['self, by module', selfModule],
  ['inclusive, by module', inclusiveModule],
  ['self, by function', selfFunction],
]) {
  console.log(`\n${title}`);
  for (const [k, n] of [...map].sort((a, b) => b[1] - a[1]).slice(0, top)) {
    console.log(`${((100 * n) / busy).toFixed(1).padStart(6)} %  ${String(n).padStart(6)}  ${k}`);
  }
}
