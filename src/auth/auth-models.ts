import { defineModel } from '../core/models.js';

export const userModel = defineModel({
  name: 'res.users',
  delegate: 'user',
  table: 'users',
  resource: 'users',
  readGroup: 'administrator',
  search: ['email', 'name'],
  sortable: ['email', 'name'],
});

declare module '../core/models.js' {
  interface ModelNames {
    'res.users': true;
  }
}
