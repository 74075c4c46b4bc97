import { callScriptModule } from './script-module';

/**
 * `numberArg` (scripts/services.mjs): the numeric options of the chaos run, the fuzzer and the
 * simulated day. A value that is not a finite number of at least the minimum stops the script with
 * a message naming the option, instead of running a fault for NaN or Infinity seconds.
 */
function numberArg(argv: string[], name: string, fallback: number | string, min?: number): { value?: number; error?: string } {
  const script =
    "import { numberArg, scriptArgs } from './scripts/services.mjs';" +
    'const [argv, name, fallback, min] = JSON.parse(process.argv[1]);' +
    'try { console.log(JSON.stringify({ value: numberArg(scriptArgs(argv), name, fallback, min ?? undefined) })); }' +
    'catch (e) { console.log(JSON.stringify({ error: e.message })); }';
  return callScriptModule(script, [argv, name, fallback, min ?? null]);
}

describe('numeric script options', () => {
  it('takes the option, else the fallback (a number, or a string from the environment)', () => {
    expect(numberArg(['--pg-blackhole-s=30'], 'pg-blackhole-s', 50)).toEqual({ value: 30 });
    expect(numberArg([], 'pg-blackhole-s', 50)).toEqual({ value: 50 });
    expect(numberArg([], 'actions', '2000', 1)).toEqual({ value: 2000 });
    expect(numberArg(['--pg-blackhole-s=0'], 'pg-blackhole-s', 50)).toEqual({ value: 0 });
  });

  it.each([
    ['a word', ['--broker-stall-s=abc']],
    ['the flag alone', ['--broker-stall-s']],
    ['an empty value', ['--broker-stall-s=']],
    ['infinity', ['--broker-stall-s=1e999']],
    ['a negative', ['--broker-stall-s=-5']],
  ])('refuses %s, naming the option', (_, argv) => {
    const { value, error } = numberArg(argv, 'broker-stall-s', 10);
    expect(value).toBeUndefined();
    expect(error).toMatch(/^--broker-stall-s must be a number of at least 0, got /);
  });

  it('refuses a value under the minimum, and a bad fallback from the environment', () => {
    expect(numberArg(['--rate=0'], 'rate', 8, 1).error).toMatch(/--rate must be a number of at least 1, got "0"/);
    expect(numberArg([], 'actions', 'lots', 1).error).toMatch(/--actions must be a number of at least 1, got "lots"/);
  });
});
