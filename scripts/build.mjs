#!/usr/bin/env node
// Compiles the services' TypeScript (apps/*/src, libs/*/src, the generated Prisma client) to
// CommonJS once, into dist/services/<content hash>/ (gitignored), mirroring the source tree, so
// a service runs as plain `node dist/services/<hash>/apps/<name>/src/main.js` instead of
// compiling itself at start through @swc-node/register. That runtime hook loads the TypeScript
// compiler and swc into every process and keeps each module's code and source map in memory:
// ~75 MB of RSS per service before any of our code runs (issue 12, docs/decisions.md "Memory").
//
// The same swc options as @swc-node/register (read from tsconfig.json by its own helper), so the
// output is what the hook produced; `@gateway/*` imports become relative paths, which stay valid
// in the mirrored tree. The build is keyed by a hash of every input file, the swc version and
// this script: unchanged sources are never rebuilt, a change anywhere gives a new directory
// (written beside it, then renamed, so concurrent starts of the same tree agree and a running
// stack keeps its files). Source maps are written beside each file (`.js.map`); run with
// NODE_OPTIONS=--enable-source-maps to have stack traces point at the TypeScript.
//
//   node scripts/build.mjs   builds if needed and prints the directory
import crypto from 'node:crypto';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const OUT = path.join(ROOT, 'dist', 'services');
const require = createRequire(import.meta.url);

/** Builds that are not the newest KEEP and were last used more than a day ago are removed. */
const KEEP = 3;
const STALE_MS = 24 * 3600_000;

const isTest = (f) => /\.(spec|int-spec|e2e-spec)\.ts$/.test(f) || f.endsWith('.d.ts');

/** Every TypeScript file a service can load: apps/*\/src and libs/*\/src, tests excluded (repo-relative, sorted). */
export function sourceFiles(root = ROOT) {
  const out = [];
  const walk = (dir) => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.name.endsWith('.ts') && !isTest(e.name)) out.push(path.relative(root, p));
    }
  };
  for (const top of ['apps', 'libs']) {
    for (const pkg of fs.readdirSync(path.join(root, top))) {
      const src = path.join(root, top, pkg, 'src');
      if (fs.existsSync(src)) walk(src);
    }
  }
  return out.sort();
}

function inputsHash(files, root = ROOT) {
  const h = crypto.createHash('sha256');
  const swcVersion = JSON.parse(fs.readFileSync(require.resolve('@swc/core/package.json'), 'utf8')).version;
  h.update(`swc ${swcVersion}\n`);
  for (const f of ['tsconfig.json', 'tsconfig.base.json', 'scripts/build.mjs'])
    h.update(`${f}\n`).update(fs.readFileSync(path.join(root, f)));
  for (const f of files) h.update(`\n${f}\n`).update(fs.readFileSync(path.join(root, f)));
  return h.digest('hex').slice(0, 16);
}

/**
 * The directory holding the compiled services for the current sources, built first when it is
 * missing. `<dir>/apps/<service>/src/main.js` is a service's entry.
 */
export async function ensureBuilt({ log = () => {} } = {}) {
  const files = sourceFiles();
  const dir = path.join(OUT, inputsHash(files));
  if (fs.existsSync(path.join(dir, '.complete'))) {
    markInUse(dir);
    return dir;
  }
  const t0 = Date.now();
  const tmp = path.join(OUT, `.tmp-${process.pid}-${crypto.randomBytes(4).toString('hex')}`);
  try {
    await compile(files, tmp);
    fs.writeFileSync(path.join(tmp, '.complete'), `${new Date().toISOString()}\n`);
    try {
      fs.renameSync(tmp, dir);
    } catch (err) {
      // another start built the same sources meanwhile: theirs is identical
      if (!fs.existsSync(path.join(dir, '.complete'))) throw err;
    }
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
  log(`compiled ${files.length} files to ${path.relative(ROOT, dir)} in ${Date.now() - t0} ms`);
  prune(dir);
  return dir;
}

async function compile(files, outDir) {
  // The hook's own reading of tsconfig.json, so the output is what @swc-node/register produced.
  const { readDefaultTsConfig, tsCompilerOptionsToSwcConfig } = require('@swc-node/register/read-default-tsconfig');
  const { transform } = require('@swc-node/core');
  const tsOptions = readDefaultTsConfig(path.join(ROOT, 'tsconfig.json'));
  let next = 0;
  const worker = async () => {
    while (next < files.length) {
      const rel = files[next++];
      const abs = path.join(ROOT, rel);
      const { code, map } = await transform(fs.readFileSync(abs, 'utf8'), abs, tsCompilerOptionsToSwcConfig(tsOptions, abs));
      const target = path.join(outDir, rel.replace(/\.ts$/, '.js'));
      fs.mkdirSync(path.dirname(target), { recursive: true });
      fs.writeFileSync(target, map ? `${code}\n//# sourceMappingURL=${path.basename(target)}.map\n` : code);
      if (map) fs.writeFileSync(`${target}.map`, map);
    }
  };
  await Promise.all(Array.from({ length: 8 }, worker));
}

/** Keeps a build from being pruned (a stack that runs for days calls this now and then). */
export function markInUse(dir) {
  const now = new Date();
  try {
    fs.utimesSync(dir, now, now);
  } catch {
    // removed meanwhile: the next start rebuilds
  }
}

function prune(current) {
  const builds = fs
    .readdirSync(OUT, { withFileTypes: true })
    .filter((e) => e.isDirectory() && !e.name.startsWith('.'))
    .map((e) => ({ dir: path.join(OUT, e.name), mtime: fs.statSync(path.join(OUT, e.name)).mtimeMs }))
    .sort((a, b) => b.mtime - a.mtime);
  for (const b of builds.slice(KEEP)) {
    if (b.dir !== current && Date.now() - b.mtime > STALE_MS) fs.rmSync(b.dir, { recursive: true, force: true });
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  console.log(await ensureBuilt({ log: (m) => console.error(`[build] ${m}`) }));
}
