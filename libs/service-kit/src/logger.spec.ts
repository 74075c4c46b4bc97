import { createLogger } from './logger';

describe('createLogger redaction', () => {
  it('removes headers, bodies and upstream keys however they are nested', () => {
    const lines: string[] = [];
    const log = createLogger('test', 'info', { write: (line: string) => void lines.push(line) });
    log.info(
      {
        authorization: 'Bearer sk-canary-1',
        'x-goog-api-key': 'AIza-canary-2',
        credential: 'sk-canary-3',
        req: { headers: { authorization: 'Bearer sk-canary-4' } },
        upstream: { authorization: 'Bearer sk-canary-5', 'x-goog-api-key': 'AIza-canary-6', credential: 'sk-canary-7' },
        action_id: 'act-1',
      },
      'attempt',
    );
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0])).toMatchObject({ action_id: 'act-1', upstream: {}, req: {} });
    expect(lines[0]).not.toMatch(/canary/);
  });
});
