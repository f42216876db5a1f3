import { defineModel } from '../core/models.js';

export const maintenanceWindowModel = defineModel({
  name: 'svc.maintenance.window',
  delegate: 'maintenanceWindow',
  table: 'maintenance_windows',
  resource: 'maintenance-windows',
  readGroup: 'user',
  search: ['reason'],
  sortable: ['starts_at', 'ends_at'],
  tracked: ['root_server_ids', 'starts_at', 'ends_at', 'reason'],
});

declare module '../core/models.js' {
  interface ModelNames {
    'svc.maintenance.window': true;
  }
}
