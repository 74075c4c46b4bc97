import { MAX_EXPORT_LINES, parseUsageExport } from './usage-export';

const line = (id: string, extra: Record<string, unknown> = {}) =>
  JSON.stringify({
    provider_request_id: id,
    input_tokens: 10,
    cached_input_tokens: 2,
    output_tokens_total: 5,
    reasoning_tokens: 1,
    ...extra,
  });

describe('parseUsageExport', () => {
  it('reads JSON lines, skipping blank lines and keeping line numbers', () => {
    const r = parseUsageExport('jsonl', [line('a'), '', line('b', { client_request_id: 'att-1', service_tier: 'priority' })].join('\r\n'));
    expect(r.invalid).toEqual([]);
    expect(r.lines.map((l) => [l.line, l.value.provider_request_id, l.value.client_request_id])).toEqual([
      [1, 'a', undefined],
      [3, 'b', 'att-1'],
    ]);
  });

  it('reads CSV with a header: quoted cells, an empty optional cell, feature calls as JSON, a BOM', () => {
    const csv = [
      '\uFEFFprovider_request_id,input_tokens,cached_input_tokens,output_tokens_total,reasoning_tokens,audio_input_tokens,feature_calls,model',
      'req-1,100,0,20,0,,"{""web_search"":2}","gpt-4o, mini"',
      'req-2,7,7,3,3,4,,m',
    ].join('\n');
    const r = parseUsageExport('csv', csv);
    expect(r.invalid).toEqual([]);
    expect(r.lines[0]).toEqual({
      line: 2,
      value: {
        provider_request_id: 'req-1',
        input_tokens: 100,
        cached_input_tokens: 0,
        output_tokens_total: 20,
        reasoning_tokens: 0,
        feature_calls: { web_search: 2 },
        model: 'gpt-4o, mini',
      },
    });
    expect(r.lines[1].value).toMatchObject({ provider_request_id: 'req-2', audio_input_tokens: 4 });
  });

  it('reports each bad line with its number and field, and keeps the good ones', () => {
    const r = parseUsageExport(
      'jsonl',
      [
        line('ok'),
        '[1,2',
        line('neg', { input_tokens: -1 }),
        line('float', { output_tokens_total: 1.5 }),
        line('cached', { cached_input_tokens: 11 }),
        line('typo', { outputs: 3 }),
        line('ok'),
        JSON.stringify({ provider_request_id: 'missing', input_tokens: 1, cached_input_tokens: 0, output_tokens_total: 1 }),
      ].join('\n'),
    );
    expect(r.lines.map((l) => l.value.provider_request_id)).toEqual(['ok']);
    expect(r.invalid.map((i) => [i.line, i.param])).toEqual([
      [2, ''],
      [3, 'input_tokens'],
      [4, 'output_tokens_total'],
      [5, 'cached_input_tokens'],
      [6, ''],
      [7, 'provider_request_id'],
      [8, 'reasoning_tokens'],
    ]);
    expect(r.invalid[5].message).toMatch(/earlier line/);
  });

  it('refuses CSV counts that are not plain digits, and unknown columns', () => {
    const r = parseUsageExport(
      'csv',
      [
        'provider_request_id,input_tokens,cached_input_tokens,output_tokens_total,reasoning_tokens',
        'a,1e3,0,1,0',
        'b,12.0,0,1,0',
        'c,0x10,0,1,0',
      ].join('\n'),
    );
    expect(r.invalid.map((i) => [i.line, i.param])).toEqual([
      [2, 'input_tokens'],
      [3, 'input_tokens'],
      [4, 'input_tokens'],
    ]);
    const unknown = parseUsageExport(
      'csv',
      'provider_request_id,input_tokens,cached_input_tokens,output_tokens_total,reasoning_tokens,cost\na,1,0,1,0,9',
    );
    expect(unknown.invalid).toEqual([expect.objectContaining({ line: 2, param: '' })]);
    expect(parseUsageExport('csv', 'a,b\n"unterminated').invalid).toEqual([expect.objectContaining({ line: 0 })]);
  });

  it('refuses hostile lines on their own line: 1e999, a NUL, a lone surrogate, 10k-deep JSON, a NUL in a CSV cell', () => {
    const r = parseUsageExport(
      'jsonl',
      [
        line('a').replace('"input_tokens":10', '"input_tokens":1e999'),
        line('b\u0000c'),
        line('\ud800'),
        line('d').replace('"reasoning_tokens":1', `"reasoning_tokens":${'['.repeat(10_000)}${']'.repeat(10_000)}`),
        line('ok'),
      ].join('\n'),
    );
    expect(r.lines.map((l) => l.value.provider_request_id)).toEqual(['ok']);
    expect(r.invalid.map((i) => i.line)).toEqual([1, 2, 3, 4]);
    expect(r.invalid[0].message).toMatch(/too large/);
    expect(r.invalid[1].message).toMatch(/NUL/);
    const csv = parseUsageExport(
      'csv',
      'provider_request_id,input_tokens,cached_input_tokens,output_tokens_total,reasoning_tokens\nx\u0000y,1,0,1,0',
    );
    expect(csv.invalid).toEqual([expect.objectContaining({ line: 2, message: expect.stringMatching(/NUL/) })]);
  });

  it(`refuses more than ${MAX_EXPORT_LINES} lines in one call`, () => {
    const big = Array.from({ length: MAX_EXPORT_LINES + 1 }, (_, i) => line(`r${i}`)).join('\n');
    expect(parseUsageExport('jsonl', big)).toEqual({ lines: [], invalid: [expect.objectContaining({ line: 0, param: 'content' })] });
  });
});
