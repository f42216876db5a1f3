import { defineModel } from '../core/models.js';

export const postgresqlServerModel = defineModel({
  name: 'svc.postgresql.server',
  delegate: 'postgresqlServer',
  table: 'postgresql_servers',
  resource: 'postgresql-servers',
  readGroup: 'user',
  search: ['name', 'ip'],
  tracked: ['name', 'ip', 'username', 'port'],
  secrets: ['password'],
  destinations: ['ip', 'port', 'username'],
});

declare module '../core/models.js' {
  interface ModelNames {
    'svc.postgresql.server': true;
  }
}
