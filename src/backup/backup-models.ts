import { defineModel } from '../core/models.js';

export const backupServerModel = defineModel({
  name: 'svc.saas.backup.server',
  delegate: 'backupServer',
  table: 'backup_servers',
  resource: 'backup-servers',
  readGroup: 'user',
  search: ['name', 'url'],
  tracked: [
    'name',
    'url',
    'download_url',
    'drop_db_path',
    'backup_db_path',
    'restore_db_path',
    'enable_local_backup',
    'enable_cloud_backup',
  ],
  secrets: ['api_key'],
  // The paths are appended to url: they cannot name another host.
  destinations: ['url'],
});

declare module '../core/models.js' {
  interface ModelNames {
    'svc.saas.backup.server': true;
  }
}
