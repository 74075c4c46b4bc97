import { execFileSync } from 'node:child_process';
import { callScriptModule } from './script-module';

/**
 * The V8 flags each service process starts with (scripts/services.mjs, `serviceNodeFlags`, called
 * in a child node).
 * The flags are measured decisions (docs/decisions.md, "Memory" and "Idle: V8's memory reducer").
 */
function flagsOf(env: Record<string, string>): Record<string, string[]> {
  const script =
    "import { serviceNodeFlags, SERVICES } from './scripts/services.mjs';" +
    'const env = JSON.parse(process.argv[1]);' +
    'console.log(JSON.stringify(Object.fromEntries(SERVICES.map((s) => [s.name, serviceNodeFlags(env, s)]))));';
  return callScriptModule(script, env);
}

describe('service V8 flags', () => {
  const flags = flagsOf({});

  it('turns the memory reducer and concurrent marking off for every service but settlement, which keeps V8 defaults', () => {
    for (const [name, f] of Object.entries(flags)) {
      if (name === 'settlement') expect(f).toEqual([]);
      else
        expect(f).toEqual(
          expect.arrayContaining([
            '--max-semi-space-size=4',
            '--heap-growing-percent=50',
            '--no-memory-reducer',
            '--no-concurrent-marking',
          ]),
        );
    }
    expect(Object.keys(flags)).toEqual(expect.arrayContaining(['admission', 'dispatch', 'policy', 'reconciliation', 'settlement']));
  });

  it('starts node with each service flag set (node refuses an option it does not know)', () => {
    for (const f of new Set(Object.values(flags).map((x) => x.join(' ')))) {
      const out = execFileSync(process.execPath, [...f.split(' ').filter(Boolean), '-e', 'console.log("up")'], { encoding: 'utf8' });
      expect(out.trim()).toBe('up');
    }
  });

  it('lets GATEWAY_NODE_FLAGS replace every service flag set, settlement included', () => {
    const replaced = flagsOf({ GATEWAY_NODE_FLAGS: ' --trace-gc  --no-memory-reducer ' });
    for (const f of Object.values(replaced)) expect(f).toEqual(['--trace-gc', '--no-memory-reducer']);
  });
});
