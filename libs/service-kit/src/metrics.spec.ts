import { Counter, Registry } from 'prom-client';
import { flushDropRecorder } from './metrics';

describe('flushDropRecorder', () => {
  function recorder() {
    const registry = new Registry();
    const counter = new Counter({
      name: 'gateway_outbox_flush_dropped_total',
      help: 'h',
      labelNames: ['topic', 'reason'],
      registers: [registry],
    });
    const warned: Array<{ obj: object; msg: string }> = [];
    const record = flushDropRecorder(counter, { warn: (obj, msg) => warned.push({ obj, msg }) });
    const values = async () =>
      Object.fromEntries((await counter.get()).values.map((v) => [`${v.labels.topic}|${v.labels.reason}`, v.value]));
    return { record, warned, values };
  }

  it('counts the rows by topic and reason, and logs counts (never a payload) for anything but a shutdown', async () => {
    const r = recorder();
    const decisions = { topic: 'gateway.admission.decisions.v1', payload: { secret: 'CANARY' } };
    r.record([decisions, decisions, { topic: 'gateway.policy.changed.v1' }], 'unreadable', 'connect ECONNREFUSED 127.0.0.1:5432');
    r.record([decisions], 'restarted');
    r.record([decisions], 'stopped');
    expect(await r.values()).toEqual({
      'gateway.admission.decisions.v1|unreadable': 2,
      'gateway.policy.changed.v1|unreadable': 1,
      'gateway.admission.decisions.v1|restarted': 1,
      'gateway.admission.decisions.v1|stopped': 1,
    });
    expect(r.warned).toEqual([
      {
        obj: { rows: 3, reason: 'unreadable', detail: 'connect ECONNREFUSED 127.0.0.1:5432' },
        msg: 'outbox rows left to the sweep: the WAL flush was not confirmed',
      },
      { obj: { rows: 1, reason: 'restarted', detail: undefined }, msg: 'outbox rows left to the sweep: the WAL flush was not confirmed' },
    ]);
    expect(JSON.stringify(r.warned)).not.toContain('CANARY');
  });
});
