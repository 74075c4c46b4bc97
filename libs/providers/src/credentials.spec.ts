import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CredentialsFileProblem, parseCredentialsFile, UpstreamCredentials } from './credentials';

describe('UpstreamCredentials', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'gw-creds-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('reads GATEWAY_CREDENTIAL_<NAME> from the environment; an unknown or malformed name is not configured', () => {
    const creds = new UpstreamCredentials({ GATEWAY_CREDENTIAL_OPENAI: ' sk-env ', OTHER: 'x' });
    expect(creds.lookup('OPENAI')).toEqual({ ok: true, value: 'sk-env' });
    expect(creds.lookup('GEMINI')).toEqual({ ok: false, reason: 'not_configured' });
    expect(creds.lookup('openai')).toEqual({ ok: false, reason: 'not_configured' });
    expect(creds.lookup('')).toEqual({ ok: false, reason: 'not_configured' });
  });

  it('refuses values a header cannot carry, and empty ones', () => {
    const creds = new UpstreamCredentials({
      GATEWAY_CREDENTIAL_A: 'sk-1\r\nx-evil: 1',
      GATEWAY_CREDENTIAL_B: '   ',
      GATEWAY_CREDENTIAL_C: 'sk é',
    });
    expect(creds.lookup('A')).toEqual({ ok: false, reason: 'invalid_value' });
    expect(creds.lookup('B')).toEqual({ ok: false, reason: 'not_configured' });
    expect(creds.lookup('C')).toEqual({ ok: false, reason: 'invalid_value' });
  });

  it('prefers the secrets file and sees a rotated key on the next lookup, also after an atomic rename', () => {
    const file = join(dir, 'credentials.json');
    writeFileSync(file, JSON.stringify({ OPENAI: 'sk-first' }));
    const creds = new UpstreamCredentials({ GATEWAY_CREDENTIAL_OPENAI: 'sk-env', GATEWAY_CREDENTIAL_GEMINI: 'AIza-env' }, file);
    expect(creds.lookup('OPENAI')).toEqual({ ok: true, value: 'sk-first' });
    expect(creds.lookup('GEMINI')).toEqual({ ok: true, value: 'AIza-env' });
    writeFileSync(file, JSON.stringify({ OPENAI: 'sk-second-rotated' }));
    expect(creds.lookup('OPENAI')).toEqual({ ok: true, value: 'sk-second-rotated' });
    const next = join(dir, 'next.json');
    writeFileSync(next, JSON.stringify({ OPENAI: 'sk-3' }));
    renameSync(next, file);
    expect(creds.lookup('OPENAI')).toEqual({ ok: true, value: 'sk-3' });
  });

  it('keeps the last good content when the file turns unparseable, and reports the problem without content', () => {
    const file = join(dir, 'credentials.env');
    writeFileSync(file, 'OPENAI=sk-good\n');
    const problems: CredentialsFileProblem[] = [];
    const creds = new UpstreamCredentials({}, file, (p) => problems.push(p));
    expect(creds.lookup('OPENAI')).toEqual({ ok: true, value: 'sk-good' });
    writeFileSync(file, '{"OPENAI": "sk-half');
    expect(creds.lookup('OPENAI')).toEqual({ ok: true, value: 'sk-good' });
    expect(problems).toEqual(['not_parseable']);
    rmSync(file);
    expect(creds.lookup('OPENAI')).toEqual({ ok: true, value: 'sk-good' });
    expect(creds.lookup('OPENAI')).toEqual({ ok: true, value: 'sk-good' });
    expect(problems).toEqual(['not_parseable', 'unreadable']);
  });

  it('fromEnvironment takes the file from GATEWAY_CREDENTIALS_FILE', () => {
    const file = join(dir, 'c.env');
    writeFileSync(file, 'GEMINI=AIza-file\n');
    const creds = UpstreamCredentials.fromEnvironment({ GATEWAY_CREDENTIALS_FILE: file });
    expect(creds.lookup('GEMINI')).toEqual({ ok: true, value: 'AIza-file' });
  });
});

describe('parseCredentialsFile', () => {
  it.each([
    ['{"OPENAI":"sk-1","GEMINI":"AIza-2"}', { OPENAI: 'sk-1', GEMINI: 'AIza-2' }],
    ['# keys\nOPENAI=sk-1\n\nexport GATEWAY_CREDENTIAL_GEMINI="AIza-2"\r\n', { OPENAI: 'sk-1', GEMINI: 'AIza-2' }],
    ["A='x=y'", { A: 'x=y' }],
  ])('%j', (text, expected) => {
    expect(Object.fromEntries(parseCredentialsFile(text) ?? [])).toEqual(expected);
  });

  it.each(['{"A": 1}', '["A"]', '{"A": "x"', 'just-a-key-without-a-name', '=value'])('refuses %j', (text) => {
    expect(parseCredentialsFile(text)).toBeNull();
  });
});
