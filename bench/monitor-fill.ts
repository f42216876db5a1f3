// The monitor-log generator shared by the benches: 2 days of 5 s samples of each server, one
// statement per run in time order, as polls append (the table's physical order follows time).
// 500 servers make ~17.3 M rows.

/** The INSERT of 2 days of 5 s samples of `serverIds`, ending 5 s before `end`. */
export function monitorSamplesSql(serverIds: readonly number[], end: Date): string {
  return `
    INSERT INTO root_server_monitor_logs (root_server_id, created_at, cpu_percent, ram_used_bytes, ram_total_bytes, ram_percent,
      disk_used_bytes, disk_total_bytes, disk_percent, net_rx_bytes_per_s, net_tx_bytes_per_s, load_1, load_5, load_15)
    SELECT s.id, ts, random() * 100, (random() * 8e9)::int8, 8000000000, random() * 100, (random() * 1e11)::int8, 200000000000,
      random() * 100, random() * 1e6, random() * 1e6, random() * 4, random() * 4, random() * 4
    FROM generate_series('${end.toISOString()}'::timestamptz - interval '2 days', '${end.toISOString()}'::timestamptz - interval '5 seconds', interval '5 seconds') AS ts
    CROSS JOIN unnest(ARRAY[${serverIds.map(Number).join(',')}]::int[]) AS s(id)`;
}
