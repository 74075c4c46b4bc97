import { execFileSync } from 'node:child_process';
import path from 'node:path';

/**
 * The local broker's server.properties and JVM flags (scripts/kafka.mjs), read in a child node:
 * the module is ESM with `import.meta`, which this compiled test cannot load. The dedupe map size
 * is a measured decision (docs/decisions.md, "The broker's heap: the log cleaner's map").
 */
const ROOT = path.resolve(__dirname, '..');

function brokerConfig(env: Record<string, string>): { properties: Record<string, string>; jvm: string[] } {
  const script =
    "import { serverProperties, brokerJvmFlags } from './scripts/kafka.mjs';" +
    'const env = JSON.parse(process.argv[1]);' +
    "console.log(JSON.stringify({ text: serverProperties({ port: 19092, logsDir: '/tmp/x' }), jvm: brokerJvmFlags(env) }));";
  const { text, jvm } = JSON.parse(
    execFileSync(process.execPath, ['--input-type=module', '-e', script, JSON.stringify(env)], { cwd: ROOT, encoding: 'utf8' }),
  ) as { text: string; jvm: string[] };
  const properties: Record<string, string> = {};
  for (const line of text.split('\n')) {
    const m = /^([a-z][\w.]*)=(.*)$/.exec(line);
    if (m) properties[m[1]] = m[2];
  }
  return { properties, jvm };
}

describe('local broker configuration', () => {
  it('keeps compaction on with a 16 MiB dedupe map instead of the 128 MiB default on the heap', () => {
    const { properties } = brokerConfig({});
    expect(properties['log.cleaner.dedupe.buffer.size']).toBe(String(16 * 1024 * 1024));
    expect(properties['log.cleaner.enable']).not.toBe('false');
  });

  it('appends KAFKA_EXTRA_JVM_FLAGS after its own heap flags, ignoring blank ones', () => {
    expect(brokerConfig({}).jvm).not.toContain('');
    const { jvm } = brokerConfig({ KAFKA_EXTRA_JVM_FLAGS: '  -Xmx768m   -Xlog:gc ' });
    expect(jvm).not.toContain('');
    expect(jvm.indexOf('-Xmx768m')).toBeGreaterThan(jvm.indexOf('-Xmx512m'));
    expect(jvm).toContain('-Xlog:gc');
  });
});
