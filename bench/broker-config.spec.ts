import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { callScriptModule } from './script-module';

/**
 * The local broker's server.properties, JVM flags and GC-log reader (scripts/kafka.mjs, called in
 * a child node). The dedupe map size is a measured decision (docs/decisions.md, "The broker's
 * heap: the log cleaner's map").
 */

function brokerConfig(env: Record<string, string>): { properties: Record<string, string>; jvm: string[] } {
  const script =
    "import { serverProperties, brokerJvmFlags } from './scripts/kafka.mjs';" +
    'const env = JSON.parse(process.argv[1]);' +
    "console.log(JSON.stringify({ text: serverProperties({ port: 19092, logsDir: '/tmp/x' }), jvm: brokerJvmFlags(env) }));";
  const { text, jvm } = callScriptModule<{ text: string; jvm: string[] }>(script, env);
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

  it("counts the broker's collections that ended inside a window from its GC log", () => {
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'gc-')), 'broker-gc.log');
    fs.writeFileSync(
      file,
      [
        '[2026-12-06T09:59:59.990+0000] Using Serial',
        '[2026-12-06T09:59:59.999+0000] GC(0) Pause Young (Allocation Failure) 68M->8M(247M) 18.807ms',
        '[2026-12-06T10:00:00.512+0000] GC(1) Pause Young (Allocation Failure) 117M->49M(247M) 12.097ms',
        '[2026-12-06T10:00:03.000+0000] GC(2) Pause Young (Allocation Failure) 117M->49M(247M) 9.5ms',
        '[2026-12-06T10:00:05.000+0000] GC(3) Pause Full (Metadata GC Threshold) 32M->21M(247M) 28.713ms',
        '[2026-12-06T10:00:10.001+0000] GC(4) Pause Young (Allocation Failure) 117M->49M(247M) 10.5ms',
        '',
      ].join('\n'),
    );
    const script =
      "import { brokerGcPauses } from './scripts/kafka.mjs';" +
      'const [file, from, to] = JSON.parse(process.argv[1]);' +
      "console.log(JSON.stringify([brokerGcPauses(file, from, to), brokerGcPauses(file + '.none', from, to)]));";
    const window = [file, Date.parse('2026-12-06T10:00:00Z'), Date.parse('2026-12-06T10:00:10Z')];
    const [pauses, none] = callScriptModule<[Record<string, number>, null]>(script, window);
    expect(pauses).toEqual({ young: 2, full: 1, youngPauseMs: 21.597, fullPauseMs: 28.713, maxPauseMs: 28.713 });
    expect(none).toBeNull();
  });

  it('appends KAFKA_EXTRA_JVM_FLAGS after its own heap flags, ignoring blank ones', () => {
    expect(brokerConfig({}).jvm).not.toContain('');
    const { jvm } = brokerConfig({ KAFKA_EXTRA_JVM_FLAGS: '  -Xmx768m   -Xlog:gc ' });
    expect(jvm).not.toContain('');
    expect(jvm.indexOf('-Xmx768m')).toBeGreaterThan(jvm.indexOf('-Xmx512m'));
    expect(jvm).toContain('-Xlog:gc');
  });
});
