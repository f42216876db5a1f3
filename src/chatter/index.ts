// The discussion thread of every record family: messages with tracking values, and activities.
import type { Feature } from '../feature.js';
import { registerChatterRoutes } from './chatter-routes.js';

export const chatter: Feature = {
  name: 'chatter',
  routes: registerChatterRoutes,
};
