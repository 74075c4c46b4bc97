import { logLevel } from 'kafkajs';
import { kafkajsLogLine } from './kafka-bus';

describe('kafkajsLogLine', () => {
  const setup = () => {
    const lines: Array<[string, object, string | undefined]> = [];
    const logger = {
      info: (o: object, m?: string) => void lines.push(['info', o, m]),
      warn: (o: object, m?: string) => void lines.push(['warn', o, m]),
      error: (o: object, m?: string) => void lines.push(['error', o, m]),
    };
    const line = kafkajsLogLine(logger);
    const entry = (level: logLevel, message: string, extra: object = {}) =>
      line({ namespace: 'Producer', level, label: '', log: { timestamp: 't', logger: 'kafkajs', message, ...extra } });
    return { lines, entry };
  };

  it('keeps errors as errors and other warnings as warnings, with kafkajs namespace and fields', () => {
    const f = setup();
    f.entry(logLevel.ERROR, 'Connection error: connect ECONNREFUSED', { broker: '127.0.0.1:9092' });
    f.entry(logLevel.WARN, 'Response Metadata: leader not available');
    expect(f.lines).toEqual([
      ['error', expect.objectContaining({ kafka: 'Producer', broker: '127.0.0.1:9092' }), 'Connection error: connect ECONNREFUSED'],
      ['warn', expect.objectContaining({ kafka: 'Producer' }), 'Response Metadata: leader not available'],
    ]);
  });

  it("writes the idempotent producer's limited-retries warning at info: the retries are limited by design", () => {
    const f = setup();
    f.entry(logLevel.WARN, 'Limiting retries for the idempotent producer may invalidate EoS guarantees');
    expect(f.lines.map(([level]) => level)).toEqual(['info']);
  });
});
