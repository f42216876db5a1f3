// Where alert evaluation keeps its working state in Redis, shared by every worker process:
// - the rules version, bumped by every rule write: each process keeps the active rules in memory
//   and reloads them when the version moved (so a change takes effect on the next poll);
// - per root server, a hash of its firing rules (`f:<rule id>`) and of the rules that started to
//   hold and since when (`s:<rule id>` = "<ms since the epoch>:<rule version>"), marked `init`
//   once built. A missing hash (Redis lost it, or it expired) is rebuilt from PostgreSQL.
export const rulesVersionKey = (prefix: string) => `${prefix}:alerts:rules-version`;
export const serverStateKey = (prefix: string, serverId: number) => `${prefix}:alerts:server:${serverId}`;
/** A quiet server's state is rebuilt from the database after this long without a change. */
export const SERVER_STATE_TTL_S = 7 * 86_400;
