import { defineModel } from '../core/models.js';

export const databaseTemplateModel = defineModel({
  name: 'svc.database.template',
  delegate: 'databaseTemplate',
  table: 'database_templates',
  resource: 'database-templates',
  readGroup: 'user',
  search: ['name', 'template_db_name'],
  tracked: ['name', 'postgresql_server_id', 'template_db_name', 'root_server_id', 'owner_role'],
  secrets: ['owner_password', 'admin_password'],
  // The password is sent to the server as that role: a change of either forgets it.
  destinations: ['postgresql_server_id', 'owner_role'],
});

declare module '../core/models.js' {
  interface ModelNames {
    'svc.database.template': true;
  }
}
