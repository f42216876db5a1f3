// Partners (res.partner): the customers trial requests turn into. The e-mail is stored lower-cased
// and unique, so a partner is found again by e-mail whatever its case.
import type { AppContext } from '../context.js';
import type { DbTx } from '../core/db.js';
import { createRecordService } from '../core/records.js';
import type { Precondition } from '../core/conditional-write.js';
import type { Author } from '../core/chatter.js';
import { partnerModel } from './partner-models.js';

type Data = Record<string, unknown>;

export function normalizeEmail(email: string): string {
  return email.trim().toLowerCase();
}

function normalized(data: Data): Data {
  return typeof data.email === 'string' ? { ...data, email: normalizeEmail(data.email) } : data;
}

export function createPartnerService(ctx: Pick<AppContext, 'db' | 'secretBox'>) {
  const records = createRecordService(ctx, partnerModel);
  return {
    ...records,
    create: (data: Data, author: Author | null = null) => records.create(normalized(data), author),
    update: (id: number, data: Data, author: Author | null = null, precondition?: Precondition) =>
      records.update(id, normalized(data), author, precondition),
  };
}

export interface PartnerContact {
  name: string;
  company_name: string;
  email: string;
  mobile: string;
}

/**
 * The partner with this e-mail (case-insensitive), created when none exists. Safe when two
 * transactions do it at once: the insert is ON CONFLICT DO NOTHING on the unique e-mail.
 */
export async function findOrCreatePartner(tx: DbTx, contact: PartnerContact) {
  const email = normalizeEmail(contact.email);
  const inserted = await tx.$executeRaw`
    INSERT INTO partners (name, company_name, email, mobile, updated_at)
    VALUES (${contact.name}, ${contact.company_name}, ${email}, ${contact.mobile}, now())
    ON CONFLICT (email) DO NOTHING`;
  const partner = await tx.partner.findUniqueOrThrow({ where: { email } });
  return { partner, created: inserted === 1 };
}
