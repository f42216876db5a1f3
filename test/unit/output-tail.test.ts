// The run_cmd output tail (src/servers/output-tail.ts), with fake timers: what is published while a
// command runs, and that its timer stops however the command ends. Needs no service.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { withOutputTail, type OutputProgress } from '../../src/servers/output-tail.js';

afterEach(() => {
  vi.useRealTimers();
});

describe('withOutputTail', () => {
  it('publishes the masked output at most once a period while it changes, and what came last at the end', async () => {
    vi.useFakeTimers();
    const published: OutputProgress[] = [];
    const result = await withOutputTail(
      async (p) => void published.push(p),
      (text) => text.replaceAll('s3cret', '********'),
      async (add) => {
        add(Buffer.from('one s3cret\n'));
        await vi.advanceTimersByTimeAsync(1000);
        add(Buffer.from('two\n'));
        return 'done';
      },
    );
    expect(result).toBe('done');
    expect(published.map((p) => [p.output_tail, p.output_bytes])).toEqual([
      ['one ********\n', 11],
      ['one ********\ntwo\n', 15],
    ]);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('stops its timer when the command fails before it runs', async () => {
    vi.useFakeTimers();
    await expect(
      withOutputTail(
        async () => {},
        (text) => text,
        async () => {
          throw new Error('sudo needs a password');
        },
      ),
    ).rejects.toThrow('sudo needs a password');
    expect(vi.getTimerCount()).toBe(0);
  });
});
