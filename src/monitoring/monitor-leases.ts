// What the monitor runners of all worker processes share in Redis, and the rules they all apply
// (each runner's lease keeper, lease-keeper.ts, applies them):
// - `…:monitor:workers`: a sorted set of worker id → last heartbeat; a worker is live while its
//   heartbeat is younger than the lease time;
// - `…:monitor:lease:<id>` = the worker polling the server, expiring unless renewed;
// - `…:monitor:slot:<id>` = the last due time recorded for the server (CLAIM: a due time is
//   recorded only by the lease holder and only if it is newer, so never twice);
// - `…:monitor:warm:<id>` = a worker that has a connection and an idle stream ready for a server it
//   should hold but does not yet: the holder hands the server over only then (no gap on a join);
// - rendezvous hashing ranks the live workers per server: the first holds it, the second keeps a
//   warm standby, so a failover opens no connection.
import { createHash } from 'node:crypto';

export const leaseKey = (prefix: string, id: number) => `${prefix}:monitor:lease:${id}`;
export const slotKey = (prefix: string, id: number) => `${prefix}:monitor:slot:${id}`;
export const warmKey = (prefix: string, id: number) => `${prefix}:monitor:warm:${id}`;
export const workersKey = (prefix: string) => `${prefix}:monitor:workers`;

// KEYS: lease, slot, sample per item; ARGV: worker, slot ttl, then due, sample json ('' = keep), sample ttl per item.
export const CLAIM = `
local out = {}
for i = 1, #KEYS / 3 do
  local ok = 0
  if redis.call('GET', KEYS[3*i-2]) == ARGV[1] then
    local due = tonumber(ARGV[3*i])
    if (tonumber(redis.call('GET', KEYS[3*i-1]) or '0') or 0) < due then
      redis.call('SET', KEYS[3*i-1], ARGV[3*i], 'PX', ARGV[2])
      if ARGV[3*i+1] ~= '' then redis.call('SET', KEYS[3*i], ARGV[3*i+1], 'PX', ARGV[3*i+2]) end
      ok = 1
    end
  end
  out[i] = ok
end
return out`;

// KEYS: leases; ARGV: worker, lease ms. Answers 1 per lease still held (and renewed).
export const RENEW = `
local out = {}
for i, k in ipairs(KEYS) do
  if redis.call('GET', k) == ARGV[1] then redis.call('PEXPIRE', k, ARGV[2]); out[i] = 1 else out[i] = 0 end
end
return out`;

// KEYS: leases; ARGV: worker. Deletes those the worker holds.
export const RELEASE = `
for _, k in ipairs(KEYS) do if redis.call('GET', k) == ARGV[1] then redis.call('DEL', k) end end
return 0`;

/** The rendezvous weight of a (worker, server) pair: a well-mixed hash (worker ids differ in few characters). */
function weight(worker: string, id: number): number {
  return createHash('md5').update(`${id}/${worker}`).digest().readUInt32BE(0);
}

/** The first and second choice among live workers for a server. */
export interface Ranking {
  first: string | undefined;
  second: string | undefined;
}

/**
 * Ranks the live workers per server (rendezvous hashing), cached while the live set stays the
 * same: given the live set (once per sync), answers the ranking for that set.
 */
export function rendezvous() {
  let liveKey = '';
  const cache = new Map<number, Ranking>();
  return (live: string[]) => {
    const key = live.join(' ');
    if (key !== liveKey) {
      liveKey = key;
      cache.clear();
    }
    return (id: number): Ranking => {
      let r = cache.get(id);
      if (!r) {
        r = rank(id, live);
        cache.set(id, r);
      }
      return r;
    };
  };
}

function rank(id: number, live: string[]): Ranking {
  let first: [string, number] | undefined;
  let second: [string, number] | undefined;
  for (const w of live) {
    const x: [string, number] = [w, weight(w, id)];
    if (!first || x[1] > first[1]) [first, second] = [x, first];
    else if (!second || x[1] > second[1]) second = x;
  }
  return { first: first?.[0], second: second?.[0] };
}
