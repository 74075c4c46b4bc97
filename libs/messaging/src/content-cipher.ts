import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';

/**
 * AES-256-GCM for the only content-bearing messages (dispatch command and reply). The action id
 * is bound as additional authenticated data so a body cannot be replayed under another action.
 */
export interface EncryptedBody {
  alg: 'A256GCM';
  kid: string;
  iv: string;
  tag: string;
  ct: string;
}

export class ContentCipher {
  private readonly kid: string;

  constructor(private readonly key: Buffer) {
    if (key.length !== 32) throw new Error('content key must be 32 bytes (AES-256)');
    this.kid = createHash('sha256').update(key).digest('hex').slice(0, 8);
  }

  /** GATEWAY_CONTENT_KEY: 32 bytes, base64 or hex. */
  static fromEnv(env: NodeJS.ProcessEnv = process.env): ContentCipher {
    const raw = env.GATEWAY_CONTENT_KEY;
    if (!raw) throw new Error('GATEWAY_CONTENT_KEY is not set (32 bytes, base64 or hex)');
    const key = /^[0-9a-fA-F]{64}$/.test(raw) ? Buffer.from(raw, 'hex') : Buffer.from(raw, 'base64');
    return new ContentCipher(key);
  }

  encrypt(plain: unknown, aad: string): EncryptedBody {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    cipher.setAAD(Buffer.from(aad, 'utf8'));
    const ct = Buffer.concat([cipher.update(JSON.stringify(plain), 'utf8'), cipher.final()]);
    return {
      alg: 'A256GCM',
      kid: this.kid,
      iv: iv.toString('base64'),
      tag: cipher.getAuthTag().toString('base64'),
      ct: ct.toString('base64'),
    };
  }

  decrypt(body: EncryptedBody, aad: string): unknown {
    if (body.kid !== this.kid) throw new Error(`unknown content key id ${body.kid}`);
    const decipher = createDecipheriv('aes-256-gcm', this.key, Buffer.from(body.iv, 'base64'));
    decipher.setAAD(Buffer.from(aad, 'utf8'));
    decipher.setAuthTag(Buffer.from(body.tag, 'base64'));
    const plain = Buffer.concat([decipher.update(Buffer.from(body.ct, 'base64')), decipher.final()]);
    return JSON.parse(plain.toString('utf8'));
  }
}
