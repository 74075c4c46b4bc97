import { StatementGroups } from './statement-groups';

/** The grouping rule alone (the statements themselves: apps/dispatch/test/dispatch-groups.int-spec.ts). */
describe('StatementGroups', () => {
  function recorder(answer: (items: number[]) => number[] | Promise<number[]> = (items) => items.map((i) => i * 10)) {
    const groups: number[][] = [];
    const pending: Array<() => void> = [];
    let held = false;
    const groupsRun = new StatementGroups<number, number>(async (items) => {
      groups.push(items);
      if (held) await new Promise<void>((r) => pending.push(r));
      return answer(items);
    }, 3);
    return {
      groupsRun,
      groups,
      hold: () => (held = true),
      /** lets every held statement finish; later ones run at once */
      release: () => {
        held = false;
        for (const r of pending.splice(0)) r();
      },
    };
  }

  it('items of one event-loop turn go together, at most maxGroup per statement, each answered with its own result', async () => {
    const { groupsRun, groups } = recorder();
    const results = await Promise.all([1, 2, 3, 4, 5].map((i) => groupsRun.submit('k', i)));
    expect(results).toEqual([10, 20, 30, 40, 50]);
    expect(groups).toEqual([
      [1, 2, 3],
      [4, 5],
    ]);
  });

  it('items arriving while a statement of their key runs wait for it and go in the next; other keys do not wait', async () => {
    const r = recorder();
    r.hold();
    const first = r.groupsRun.submit('k', 1);
    await new Promise((res) => setImmediate(res));
    expect(r.groups).toEqual([[1]]);
    const later = [r.groupsRun.submit('k', 2), r.groupsRun.submit('k', 3)];
    const other = r.groupsRun.submit('other', 9);
    await new Promise((res) => setImmediate(res));
    expect(r.groups).toEqual([[1], [9]]);
    r.release();
    await expect(first).resolves.toBe(10);
    await expect(other).resolves.toBe(90);
    await expect(Promise.all(later)).resolves.toEqual([20, 30]);
    expect(r.groups).toEqual([[1], [9], [2, 3]]);
  });

  it('with two lanes a second statement starts only for a whole group waiting; less waits for the running one', async () => {
    const groups: number[][] = [];
    const pending: Array<() => void> = [];
    const twoLanes = new StatementGroups<number, number>(
      async (items) => {
        groups.push(items);
        await new Promise<void>((r) => pending.push(r));
        return items;
      },
      2,
      2,
    );
    const turn = () => new Promise((res) => setImmediate(res));
    const first = twoLanes.submit('k', 1);
    await turn();
    const lone = twoLanes.submit('k', 2);
    await turn();
    expect(groups).toEqual([[1]]);
    const whole = twoLanes.submit('k', 3);
    await turn();
    expect(groups).toEqual([[1], [2, 3]]);
    const third = twoLanes.submit('k', 4);
    await turn();
    pending.shift()!();
    await expect(first).resolves.toBe(1);
    await turn();
    expect(groups).toEqual([[1], [2, 3]]);
    pending.shift()!();
    await expect(Promise.all([lone, whole])).resolves.toEqual([2, 3]);
    await turn();
    expect(groups).toEqual([[1], [2, 3], [4]]);
    pending.shift()!();
    await expect(third).resolves.toBe(4);
  });

  it('a statement failed by a lost connection rejects every item of its group and not the next group', async () => {
    let calls = 0;
    const { groupsRun } = recorder((items) => {
      calls += 1;
      if (calls === 1) throw new Error('Connection terminated unexpectedly');
      return items.map((i) => -i);
    });
    const results = await Promise.allSettled([1, 2, 3, 4].map((i) => groupsRun.submit('k', i)));
    expect(results.map((x) => (x.status === 'fulfilled' ? x.value : (x.reason as Error).message))).toEqual([
      'Connection terminated unexpectedly',
      'Connection terminated unexpectedly',
      'Connection terminated unexpectedly',
      -4,
    ]);
  });

  it('a statement that answers the wrong number of rows fails its group rather than mis-assigning results', async () => {
    const { groupsRun } = recorder((items) => items.slice(1));
    await expect(Promise.all([groupsRun.submit('k', 1), groupsRun.submit('k', 2)])).rejects.toThrow(/answered with 1 results/);
  });

  describe('an item refused for its data fails alone (any error but a transient one)', () => {
    /** The server's refusal of a whole statement as `pg` reports it: the SQLSTATE as `code`. */
    const refused = (code: string) => Object.assign(new Error(`refused (${code})`), { code });
    const poisonAt = (poison: number, code: string) => (items: number[]) => {
      if (items.includes(poison)) throw refused(code);
      return items.map((i) => i * 10);
    };

    it.each([
      ['22P05', 'a NUL in jsonb'],
      ['22003', 'a number out of range'],
      ['54000', 'an index row too large'],
      ['23505', 'a unique violation'],
      ['P0001', 'an exception raised by the function'],
    ])('%s (%s): the group runs again item by item, in order; the others answered as ever', async (code: string) => {
      const { groupsRun, groups } = recorder(poisonAt(2, code));
      const results = await Promise.allSettled([1, 2, 3].map((i) => groupsRun.submit('k', i)));
      expect(results.map((x) => (x.status === 'fulfilled' ? x.value : (x.reason as { code: string }).code))).toEqual([10, code, 30]);
      expect(groups).toEqual([[1, 2, 3], [1], [2], [3]]);
    });

    it.each([
      ['57P01', 'terminated'],
      ['08006', 'connection failure'],
      ['57014', 'statement cancelled: it may have committed'],
      ['none', 'a lost connection'],
      ['none', 'the answer bound: the statement may still commit'],
    ])('%s (%s) is not split: every item of the group gets the error once', async (code: string, what: string) => {
      const { groupsRun, groups } = recorder(() => {
        if (code !== 'none') throw refused(code);
        throw new Error(
          what === 'a lost connection'
            ? 'Connection terminated unexpectedly'
            : 'Connection terminated: no answer from the database within 12000 ms',
        );
      });
      const results = await Promise.allSettled([1, 2, 3].map((i) => groupsRun.submit('k', i)));
      expect(results.every((x) => x.status === 'rejected')).toBe(true);
      expect(groups).toEqual([[1, 2, 3]]);
    });

    it('an error before the statement left (a value JSON cannot carry) splits too', async () => {
      const { groupsRun, groups } = recorder((items) => {
        if (items.includes(2)) throw new TypeError('Do not know how to serialize a BigInt');
        return items.map((i) => i * 10);
      });
      const results = await Promise.allSettled([1, 2, 3].map((i) => groupsRun.submit('k', i)));
      expect(results.map((x) => x.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
      expect(groups).toEqual([[1, 2, 3], [1], [2], [3]]);
    });

    it('a statement answered with the wrong number of rows is never run again (it may have committed)', async () => {
      const { groupsRun, groups } = recorder((items) => items.slice(1));
      await Promise.allSettled([1, 2, 3].map((i) => groupsRun.submit('k', i)));
      expect(groups).toEqual([[1, 2, 3]]);
    });

    it('a group of one is not run again', async () => {
      const { groupsRun, groups } = recorder(poisonAt(1, '22P05'));
      await expect(groupsRun.submit('k', 1)).rejects.toMatchObject({ code: '22P05' });
      expect(groups).toEqual([[1]]);
    });

    it('items that arrive meanwhile wait for the split group, then go together as ever', async () => {
      const r = recorder(poisonAt(2, '22P05'));
      const first = [1, 2, 3].map((i) => r.groupsRun.submit('k', i));
      await new Promise((res) => setImmediate(res));
      const later = [4, 5].map((i) => r.groupsRun.submit('k', i));
      await Promise.allSettled([...first, ...later]);
      expect(r.groups).toEqual([[1, 2, 3], [1], [2], [3], [4, 5]]);
    });
  });

  describe('an item whose caller gives up (its signal aborts)', () => {
    const gone = () => Object.assign(new Error('the client left'), { name: 'ClientLeft' });
    const turn = () => new Promise((res) => setImmediate(res));

    it('while it waits for a statement: taken out, rejected with the reason, never sent; the others go as ever', async () => {
      const r = recorder();
      r.hold();
      const first = r.groupsRun.submit('k', 1);
      await turn();
      const left = new AbortController();
      const waiting = [r.groupsRun.submit('k', 2), r.groupsRun.submit('k', 3, left.signal), r.groupsRun.submit('k', 4)];
      const reason = gone();
      left.abort(reason);
      await expect(waiting[1]).rejects.toBe(reason); // at once, not when the running statement ends
      r.release();
      await expect(first).resolves.toBe(10);
      await expect(Promise.all([waiting[0], waiting[2]])).resolves.toEqual([20, 40]);
      expect(r.groups).toEqual([[1], [2, 4]]);
    });

    it('before it is submitted: rejected at once, never sent', async () => {
      const r = recorder();
      const reason = gone();
      await expect(r.groupsRun.submit('k', 1, AbortSignal.abort(reason))).rejects.toBe(reason);
      await turn();
      expect(r.groups).toEqual([]);
    });

    it('after its statement started: answered as ever (the statement may commit; the caller decides what to do with it)', async () => {
      const r = recorder();
      r.hold();
      const left = new AbortController();
      const running = r.groupsRun.submit('k', 1, left.signal);
      await turn();
      left.abort(gone());
      r.release();
      await expect(running).resolves.toBe(10);
    });

    it('the only item of its key, dropped: the key is forgotten, and the next item is sent as ever', async () => {
      const r = recorder();
      r.hold();
      const first = r.groupsRun.submit('k', 1);
      await turn();
      const left = new AbortController();
      const dropped = r.groupsRun.submit('k', 2, left.signal);
      left.abort(gone());
      await expect(dropped).rejects.toThrow('the client left');
      r.release();
      await first;
      await turn();
      expect((r.groupsRun as unknown as { keys: Map<string, unknown> }).keys.size).toBe(0);
      await expect(r.groupsRun.submit('k', 5)).resolves.toBe(50);
      expect(r.groups).toEqual([[1], [5]]);
    });
  });

  it('refuses a group size or a lane count below one', () => {
    expect(() => new StatementGroups(async () => [], 0)).toThrow(RangeError);
    expect(() => new StatementGroups(async () => [], 5, 0)).toThrow(RangeError);
  });
});
