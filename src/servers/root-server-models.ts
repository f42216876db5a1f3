import { defineModel } from '../core/models.js';

export const rootServerModel = defineModel({
  name: 'svc.root.server',
  delegate: 'rootServer',
  table: 'root_servers',
  resource: 'root-servers',
  readGroup: 'user',
  search: ['name', 'ip'],
  sortable: ['name', 'ip', 'server_state'],
  // The spec marks none; an operator wants these in the chatter.
  tracked: [
    'name',
    'ip',
    'username',
    'port',
    'state',
    'sudo_user',
    'sudo_user_no_password',
    'host_key',
    'monitoring_enabled',
    'monitor_update_interval',
    'server_state',
    'code_server_port',
    'code_server_domain',
    'code_server_state',
    'dir_init_done',
    'cmd',
    'odoo_state',
    'odoo_version_id',
    'odoo_http_port',
    'odoo_postgresql_server_id',
    'odoo_db_user',
  ],
  secrets: ['password', 'key', 'code_server_password', 'odoo_db_password', 'odoo_admin_passwd', 'odoo_host_secret'],
  // Another address or login is another host: the credentials are not sent there, and its key is
  // learnt again at the next connection.
  destinations: ['ip', 'port', 'username'],
  forgetOnMove: { host_key: null },
});

declare module '../core/models.js' {
  interface ModelNames {
    'svc.root.server': true;
  }
}
