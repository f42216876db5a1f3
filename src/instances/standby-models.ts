import { defineModel } from '../core/models.js';

/** Ready copies of a trial package's template; their creation and removal go to the action log. */
export const standbyDatabaseModel = defineModel({
  name: 'svc.standby.database',
  delegate: 'standbyDatabase',
  table: 'standby_databases',
  resource: 'standby-databases',
  readGroup: 'operator',
  // Which databases the pool makes and drops is the operators' business, as the pool itself.
  actionLogGroup: 'operator',
  search: ['database_name'],
});

declare module '../core/models.js' {
  interface ModelNames {
    'svc.standby.database': true;
  }
}
