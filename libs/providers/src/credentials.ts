import { readFileSync, statSync } from 'node:fs';
import { isCredentialRef } from '@gateway/domain';

/** Prefix of the environment variables that hold upstream keys: `GATEWAY_CREDENTIAL_<NAME>`. */
export const CREDENTIAL_ENV_PREFIX = 'GATEWAY_CREDENTIAL_';

export type CredentialLookup = { ok: true; value: string } | { ok: false; reason: 'not_configured' | 'invalid_value' };

/** Why the secrets file could not be used; never carries any of its content. */
export type CredentialsFileProblem = 'unreadable' | 'not_parseable';

/**
 * The one place dispatch turns a route contract's `credential_ref` into the key it sends
 * upstream. Sources, in order:
 *
 * 1. the secrets file `GATEWAY_CREDENTIALS_FILE`, re-read whenever its modification time, size
 *    or inode changes (checked on every lookup: one `stat`, so a rotated key is used by the next
 *    request without a restart; an atomic rename is seen too). Its format is a JSON object
 *    `{"OPENAI": "sk-…"}` when the content starts with `{`, otherwise `NAME=value` lines (`#`
 *    comments and blank lines ignored; a `GATEWAY_CREDENTIAL_` prefix on the name is allowed, so
 *    an env file works as is). A file that cannot be read or parsed keeps the last good content
 *    (a writer caught mid-write must not drop every key) and reports the problem by kind only;
 * 2. the environment variable `GATEWAY_CREDENTIAL_<NAME>`, read at start-up.
 *
 * The file comes first because it is the source that can rotate. A value must be printable ASCII
 * without spaces (what an HTTP header may carry); anything else is `invalid_value` and is never
 * sent. Values are held in memory only and never logged: problems name the credential, not its
 * value.
 */
export class UpstreamCredentials {
  private readonly fromEnv: ReadonlyMap<string, string>;
  private fileValues = new Map<string, string>();
  private fileStamp: string | null = null;

  constructor(
    env: Record<string, string | undefined>,
    private readonly file: string | null = null,
    private readonly onFileProblem: (problem: CredentialsFileProblem) => void = () => undefined,
  ) {
    const fromEnv = new Map<string, string>();
    for (const [k, v] of Object.entries(env)) {
      if (k.startsWith(CREDENTIAL_ENV_PREFIX) && v !== undefined) fromEnv.set(k.slice(CREDENTIAL_ENV_PREFIX.length), v);
    }
    this.fromEnv = fromEnv;
  }

  static fromEnvironment(env: Record<string, string | undefined>, onFileProblem?: (p: CredentialsFileProblem) => void) {
    const file = env.GATEWAY_CREDENTIALS_FILE?.trim();
    return new UpstreamCredentials(env, file ? file : null, onFileProblem);
  }

  lookup(name: string): CredentialLookup {
    if (!isCredentialRef(name)) return { ok: false, reason: 'not_configured' };
    this.refreshFile();
    const raw = this.fileValues.get(name) ?? this.fromEnv.get(name);
    if (raw === undefined || raw.trim() === '') return { ok: false, reason: 'not_configured' };
    const value = raw.trim();
    return /^[\x21-\x7e]+$/.test(value) ? { ok: true, value } : { ok: false, reason: 'invalid_value' };
  }

  private refreshFile(): void {
    if (this.file === null) return;
    let stamp: string;
    try {
      const s = statSync(this.file);
      stamp = `${s.mtimeMs}:${s.size}:${s.ino}`;
    } catch {
      if (this.fileStamp !== 'missing') this.onFileProblem('unreadable');
      this.fileStamp = 'missing';
      return;
    }
    if (stamp === this.fileStamp) return;
    this.fileStamp = stamp;
    let text: string;
    try {
      text = readFileSync(this.file, 'utf8');
    } catch {
      this.onFileProblem('unreadable');
      return;
    }
    const parsed = parseCredentialsFile(text);
    if (parsed === null) this.onFileProblem('not_parseable');
    else this.fileValues = parsed;
  }
}

/** JSON object of strings, or `NAME=value` lines; null when neither. Never echoes the content. */
export function parseCredentialsFile(text: string): Map<string, string> | null {
  const out = new Map<string, string>();
  const add = (name: string, value: string) => {
    const n = name.trim().replace(/^export\s+/, '');
    out.set(n.startsWith(CREDENTIAL_ENV_PREFIX) ? n.slice(CREDENTIAL_ENV_PREFIX.length) : n, value);
  };
  if (text.trimStart().startsWith('{')) {
    let obj: unknown;
    try {
      obj = JSON.parse(text);
    } catch {
      return null;
    }
    if (obj === null || typeof obj !== 'object' || Array.isArray(obj)) return null;
    for (const [k, v] of Object.entries(obj)) {
      if (typeof v !== 'string') return null;
      add(k, v);
    }
    return out;
  }
  for (const line of text.split(/\r?\n/)) {
    const t = line.trim();
    if (t === '' || t.startsWith('#')) continue;
    const eq = t.indexOf('=');
    if (eq <= 0) return null;
    add(t.slice(0, eq), unquote(t.slice(eq + 1).trim()));
  }
  return out;
}

function unquote(v: string): string {
  return v.length >= 2 && (v[0] === '"' || v[0] === "'") && v.endsWith(v[0]) ? v.slice(1, -1) : v;
}
