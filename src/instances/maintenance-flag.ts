// A tenant's maintenance flag on its Odoo host: while it is on, svc's addon answers the database's
// requests with the maintenance page (odoo-addons/svc_instance/maintenance.py, docs/rollouts.md).
// It is a file per database under Odoo's data directory, beside the database's filestore: part of
// the customer instance on its host, as the filestore and the credentials file are, so it lives
// here, with them (not in src/maintenance, whose windows are planned work on root servers). A
// rollout, a staging refresh, a move and a backup's restore each turn it on, then off.
import { hostProgram, shCommand } from '../core/host-program.js';
import { fileNameOf, type OdooDataDir } from './filestore.js';

const FLAG = hostProgram(new URL('./host/maintenance-flag.sh', import.meta.url));

/** The command that turns the database's maintenance page on or off (run it with runOnOdooHost or a session's check). */
export const setMaintenance = (l: OdooDataDir, database: string, on: boolean): string =>
  shCommand(FLAG, 'maintenance-flag', l.dataDir, fileNameOf(database), on ? 'on' : 'off');
