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

/**
 * svc's own backup server's repositories (its local one and its cloud accounts, src/backup-server):
 * not served by svc's API (the backup server lists them), listed here so that their restic passwords
 * and cloud credentials are re-encrypted with the others when the data key rotates.
 */
export const backupRepositoryModel = defineModel({
  name: 'svc.saas.backup.repository',
  delegate: 'backupRepository',
  table: 'backup_repositories',
  readGroup: 'administrator',
  secrets: ['password', 'credentials'],
});

declare module '../core/models.js' {
  interface ModelNames {
    'svc.saas.backup.server': true;
    'svc.saas.backup.repository': true;
  }
}
