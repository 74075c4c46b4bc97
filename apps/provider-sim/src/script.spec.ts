import { parseDirectives, resolveScript, scenarioLabel, ScriptError } from './script';

describe('resolveScript', () => {
  it('returns the bare model and an empty script when there are no directives', () => {
    const r = resolveScript('sim-gpt');
    expect(r.model).toBe('sim-gpt');
    expect(r.directives).toEqual([]);
    expect(r.script).toMatchObject({ filter: [], block: false, extra: 0, reasoning: 0, cached: 0, failFirst: 0 });
    expect(r.script.latency).toBeUndefined();
  });

  it('parses every directive from the model name', () => {
    const r = resolveScript(
      'sim-gpt;latency=50-200;ttft=30;stall=40;serve=1;filter=0,2;block;no-usage;under-usage;cut-stream;fragment;echo;hostile-fields;pad-bytes=10;pad-chunks=12;extra=2;reject-n;reasoning=5;cached=4;cache-write=3;audio-in=6;audio-out=9;image-out=11;searches=2;tier=flex;words=7;status=503;fail-first=2',
    );
    expect(r.model).toBe('sim-gpt');
    expect(r.script).toEqual({
      latency: { min: 50, max: 200 },
      ttft: 30,
      stall: 40,
      serve: 1,
      filter: [0, 2],
      block: true,
      noUsage: true,
      underUsage: true,
      cutStream: true,
      fragment: true,
      echo: true,
      hostileFields: true,
      padBytes: 10,
      padChunks: 12,
      extra: 2,
      rejectN: true,
      reasoning: 5,
      cached: 4,
      cacheWrite: 3,
      audioIn: 6,
      audioOut: 9,
      imageOut: 11,
      searches: 2,
      tier: 'flex',
      words: 7,
      status: 503,
      failFirst: 2,
    });
  });

  it('slow-first=<count>:<ms>: the first count requests of one body wait ms; a malformed value is refused', () => {
    expect(resolveScript('sim-gpt;slow-first=1:3000').script.slowFirst).toEqual({ count: 1, ms: 3000 });
    expect(resolveScript('sim-gpt').script.slowFirst).toBeUndefined();
    for (const bad of ['slow-first=1', 'slow-first=0:10', 'slow-first=a:b', 'slow-first=1:700000', 'slow-first']) {
      expect(() => resolveScript(`sim-gpt;${bad}`)).toThrow(ScriptError);
    }
  });

  it.each(['tier=Flex', 'tier=a b', 'searches=17', 'audio-out=-1'])('refuses a malformed billing directive (%s)', (d) => {
    expect(() => resolveScript(`sim-gpt;${d}`)).toThrow(ScriptError);
  });

  it('accepts a single latency value and tolerates whitespace and empty segments', () => {
    const r = resolveScript(' gemini-sim ; latency=80 ;; serve = 1 ;');
    expect(r.model).toBe('gemini-sim');
    expect(r.script.latency).toEqual({ min: 80, max: 80 });
    expect(r.script.serve).toBe(1);
  });

  it('lets the header win over model directives and merges the rest', () => {
    const r = resolveScript('sim-gpt;serve=1;filter=0', 'serve=3;no-usage');
    expect(r.script.serve).toBe(3);
    expect(r.script.filter).toEqual([0]);
    expect(r.script.noUsage).toBe(true);
    expect(r.directives).toEqual(['filter=0', 'no-usage', 'serve=3']);
  });

  it.each([
    ['sim;typo=1', /unknown sim directive 'typo'/],
    ['sim;serve', /needs a value/],
    ['sim;block=1', /takes no value/],
    ['sim;serve=-1', /non-negative integer/],
    ['sim;serve=1.5', /non-negative integer/],
    ['sim;latency=200-50', /reversed/],
    ['sim;status=200', /between 400 and 599/],
  ])('rejects %s', (spec, message) => {
    expect(() => resolveScript(spec)).toThrow(ScriptError);
    expect(() => resolveScript(spec)).toThrow(message);
  });

  it('validates the header too', () => {
    expect(() => resolveScript('sim', 'nope')).toThrow(ScriptError);
  });
});

describe('parseDirectives', () => {
  it('lower-cases names and keeps values', () => {
    expect([...parseDirectives('Serve=2;BLOCK')]).toEqual([
      ['serve', '2'],
      ['block', undefined],
    ]);
  });
});

describe('scenarioLabel', () => {
  it('uses directive names only', () => {
    expect(scenarioLabel([])).toBe('none');
    expect(scenarioLabel(['filter=1', 'latency=5-10', 'no-usage'])).toBe('filter,latency,no-usage');
  });
});
