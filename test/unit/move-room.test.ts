// The room check of a move reads the filestore's size from the last usage round when it is recent,
// so the API answers without running `du` over a large filestore; otherwise it measures.
import { describe, expect, it } from 'vitest';
import { measuredFilestoreBytes } from '../../src/moves/move-checks.js';

const now = Date.parse('2026-11-28T12:00:00Z');
const usage = (filestore_bytes: number | null, measured_at: string) => ({
  db_size_bytes: 1,
  filestore_bytes,
  active_users: 1,
  record_counts: {},
  measured_at,
  missing: {},
});

describe("a move's filestore size", () => {
  it("is the usage round's when measured within a day", () => {
    expect(measuredFilestoreBytes(usage(734_000_000, '2026-11-28T02:00:00Z'), now)).toBe(734_000_000);
    expect(measuredFilestoreBytes(usage(0, '2026-11-27T12:00:00Z'), now)).toBe(0);
  });

  it('is measured on the host when the round is older, did not measure it, or never ran', () => {
    expect(measuredFilestoreBytes(usage(734_000_000, '2026-11-27T11:59:59Z'), now)).toBeNull();
    expect(measuredFilestoreBytes(usage(null, '2026-11-28T11:00:00Z'), now)).toBeNull();
    expect(measuredFilestoreBytes(null, now)).toBeNull();
  });
});
