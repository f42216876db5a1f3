// Notification servers: ntfy (self-hosted push) and FCM (cloud push), their operations and per-user tokens.
import type { Feature } from '../feature.js';
import { notificationJobHandlers } from './notification-jobs.js';
import { notificationServerModel, notificationUserTokenModel } from './notification-models.js';
import { registerNotificationRoutes } from './notification-routes.js';

export const notifications: Feature = {
  name: 'notifications',
  models: [notificationServerModel, notificationUserTokenModel],
  routes: registerNotificationRoutes,
  jobs: notificationJobHandlers,
};

// What other features use from this one: they import it from here, never from the files.
export { createNotificationService } from './notification-service.js';
