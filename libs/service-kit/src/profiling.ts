import fs from 'node:fs';
import path from 'node:path';
import { Session } from 'node:inspector';

/**
 * Opt-in CPU profiling for performance work (GATEWAY_CPU_PROFILE_DIR): starts the V8 profiler and
 * writes `<service>-<pid>.cpuprofile` when the service shuts down. Off by default.
 */
export function startCpuProfile(service: string, env: NodeJS.ProcessEnv = process.env): (() => Promise<void>) | null {
  const dir = env.GATEWAY_CPU_PROFILE_DIR;
  if (!dir) return null;
  const session = new Session();
  session.connect();
  session.post('Profiler.enable');
  session.post('Profiler.start');
  return () =>
    new Promise<void>((resolve) => {
      session.post('Profiler.stop', (err, result) => {
        if (!err) {
          fs.mkdirSync(dir, { recursive: true });
          fs.writeFileSync(path.join(dir, `${service}-${process.pid}.cpuprofile`), JSON.stringify(result.profile));
        }
        session.disconnect();
        resolve();
      });
    });
}
