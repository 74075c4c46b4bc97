import { OffsetCommitter, PartitionOffset } from './offset-committer';

describe('OffsetCommitter', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  const setup = (fail = false) => {
    const commits: PartitionOffset[][] = [];
    const errors: string[] = [];
    let failing = fail;
    const committer = new OffsetCommitter(
      1000,
      async (offsets) => {
        if (failing) {
          failing = false;
          throw new Error('REBALANCE_IN_PROGRESS');
        }
        commits.push(offsets);
      },
      (err) => errors.push(err.message),
    );
    return { committer, commits, errors };
  };

  it("commits a partition's first offset at once, then the next offset of each partition once per interval, nothing while idle", async () => {
    const { committer, commits } = setup();
    committer.handled('t', 0, '41');
    await jest.advanceTimersByTimeAsync(0);
    expect(commits).toEqual([[{ topic: 't', partition: 0, offset: '42' }]]);
    committer.handled('t', 0, '42');
    committer.handled('t', 0, '43');
    await jest.advanceTimersByTimeAsync(500);
    committer.handled('t', 1, '7'); // a partition seen for the first time goes out at once
    await jest.advanceTimersByTimeAsync(0);
    expect(commits.slice(1)).toEqual([
      [
        { topic: 't', partition: 0, offset: '44' },
        { topic: 't', partition: 1, offset: '8' },
      ],
    ]);
    committer.handled('t', 1, '8');
    committer.handled('t', 0, '44');
    await jest.advanceTimersByTimeAsync(999);
    expect(commits).toHaveLength(2);
    await jest.advanceTimersByTimeAsync(1);
    expect(commits.slice(2)).toEqual([
      [
        { topic: 't', partition: 1, offset: '9' },
        { topic: 't', partition: 0, offset: '45' },
      ],
    ]);
    await jest.advanceTimersByTimeAsync(10_000);
    expect(commits).toHaveLength(3);
    expect(jest.getTimerCount()).toBe(0);
  });

  it('flush commits at once (before a disconnect); a failed commit is tried again unless superseded', async () => {
    const { committer, commits, errors } = setup(true);
    committer.handled('t', 0, '1');
    committer.handled('t', 1, '5');
    await committer.flush();
    expect(errors).toEqual(['REBALANCE_IN_PROGRESS']);
    committer.handled('t', 0, '2');
    await committer.flush();
    expect(commits).toEqual([
      [
        { topic: 't', partition: 0, offset: '3' },
        { topic: 't', partition: 1, offset: '6' },
      ],
    ]);
    expect(jest.getTimerCount()).toBe(0);
  });

  it('after a rebalance forgets the pending offsets of partitions it no longer holds, and never re-adds them from a failed commit', async () => {
    const { committer, commits } = setup();
    committer.handled('t', 0, '1');
    committer.handled('t', 1, '1');
    await jest.advanceTimersByTimeAsync(0);
    committer.handled('t', 0, '10');
    committer.handled('t', 1, '20');
    // partition 1 moved to another member, which may have committed beyond 21 since
    committer.retain([{ topic: 't', partitions: [0] }]);
    await committer.flush();
    expect(commits.slice(1)).toEqual([[{ topic: 't', partition: 0, offset: '11' }]]);

    const committed: PartitionOffset[][] = [];
    let calls = 0;
    const racing: OffsetCommitter = new OffsetCommitter(
      1000,
      async (offsets) => {
        calls += 1;
        if (calls === 1) {
          racing.retain([{ topic: 't', partitions: [3] }]); // the rebalance lands while the commit is in flight
          throw new Error('REBALANCE_IN_PROGRESS');
        }
        committed.push(offsets);
      },
      () => undefined,
    );
    racing.handled('t', 2, '5');
    await jest.advanceTimersByTimeAsync(0);
    racing.handled('t', 3, '7');
    await racing.flush();
    expect(committed).toEqual([[{ topic: 't', partition: 3, offset: '8' }]]);
    expect(jest.getTimerCount()).toBe(0);
  });
});
