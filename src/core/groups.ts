import type { UserGroup } from '../generated/prisma/enums.js';

export type { UserGroup };
export const GROUPS = ['user', 'operator', 'administrator'] as const satisfies readonly UserGroup[];

/** user ⊂ operator ⊂ administrator. */
export function groupAllows(has: UserGroup, needs: UserGroup): boolean {
  return GROUPS.indexOf(has) >= GROUPS.indexOf(needs);
}
