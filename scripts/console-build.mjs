#!/usr/bin/env node
// Builds the web console (apps/console/web: Preact + htm, vega-embed for the charts) with esbuild
// into dist/console/<content hash>/ (gitignored): index.html, style.css and one minified app.js.
// Keyed by a hash of the web sources, package-lock.json and this script, so an unchanged console
// is never rebuilt; npm start and npm test call ensureConsoleBuilt before starting the console.
//
//   node scripts/console-build.mjs   builds if needed and prints the directory
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const WEB = path.join(ROOT, 'apps', 'console', 'web');
const OUT = path.join(ROOT, 'dist', 'console');

function inputsHash() {
  const h = crypto.createHash('sha256');
  for (const f of [path.join(ROOT, 'package-lock.json'), fileURLToPath(import.meta.url)]) h.update(fs.readFileSync(f));
  for (const f of fs.readdirSync(WEB).sort()) h.update(`\n${f}\n`).update(fs.readFileSync(path.join(WEB, f)));
  return h.digest('hex').slice(0, 16);
}

/** The directory holding the built console for the current sources, built first when missing. */
export async function ensureConsoleBuilt({ log = () => {} } = {}) {
  const dir = path.join(OUT, inputsHash());
  if (fs.existsSync(path.join(dir, 'index.html'))) return dir;
  const t0 = Date.now();
  const { build } = await import('esbuild');
  const tmp = path.join(OUT, `.tmp-${process.pid}-${crypto.randomBytes(4).toString('hex')}`);
  try {
    await build({
      entryPoints: [path.join(WEB, 'app.js')],
      bundle: true,
      minify: true,
      format: 'esm',
      target: 'es2022',
      outfile: path.join(tmp, 'app.js'),
      logLevel: 'warning',
      legalComments: 'none',
    });
    for (const f of ['index.html', 'style.css']) fs.copyFileSync(path.join(WEB, f), path.join(tmp, f));
    try {
      fs.renameSync(tmp, dir);
    } catch (err) {
      if (!fs.existsSync(path.join(dir, 'index.html'))) throw err; // a concurrent build won: identical
    }
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
  log(`built the console to ${path.relative(ROOT, dir)} in ${Date.now() - t0} ms`);
  for (const e of fs.readdirSync(OUT)) {
    const p = path.join(OUT, e);
    if (p !== dir && !e.startsWith('.') && Date.now() - fs.statSync(p).mtimeMs > 24 * 3600_000)
      fs.rmSync(p, { recursive: true, force: true });
  }
  return dir;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  console.log(await ensureConsoleBuilt({ log: (m) => console.error(`[console-build] ${m}`) }));
}
