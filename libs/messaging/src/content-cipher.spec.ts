import { randomBytes } from 'node:crypto';
import { ContentCipher } from './content-cipher';

describe('ContentCipher', () => {
  const cipher = new ContentCipher(randomBytes(32));

  it('round-trips and never shows the plaintext', () => {
    const body = cipher.encrypt({ prompt: 'CANARY-123' }, 'action-1');
    expect(JSON.stringify(body)).not.toContain('CANARY-123');
    expect(cipher.decrypt(body, 'action-1')).toEqual({ prompt: 'CANARY-123' });
  });

  it('refuses a body replayed under another action id', () => {
    const body = cipher.encrypt({ prompt: 'x' }, 'action-1');
    expect(() => cipher.decrypt(body, 'action-2')).toThrow();
  });

  it('refuses a tampered body', () => {
    const body = cipher.encrypt({ prompt: 'x' }, 'a');
    const ct = Buffer.from(body.ct, 'base64');
    ct[0] ^= 1;
    expect(() => cipher.decrypt({ ...body, ct: ct.toString('base64') }, 'a')).toThrow();
  });

  it('rejects keys of the wrong size', () => {
    expect(() => new ContentCipher(randomBytes(16))).toThrow(/32 bytes/);
  });
});
