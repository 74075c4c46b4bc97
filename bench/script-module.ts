import { execFileSync } from 'node:child_process';
import path from 'node:path';

const ROOT = path.resolve(__dirname, '..');

/**
 * Runs `code` as an ES module in a child node at the repository root and returns what it printed,
 * parsed as JSON. The scripts/*.mjs modules use `import.meta`, which the compiled tests cannot
 * load, so the bench specs call them this way. `arg` reaches the child as JSON in
 * `process.argv[1]`.
 */
export function callScriptModule<T>(code: string, arg: unknown = null): T {
  return JSON.parse(
    execFileSync(process.execPath, ['--input-type=module', '-e', code, JSON.stringify(arg)], { cwd: ROOT, encoding: 'utf8' }),
  ) as T;
}
