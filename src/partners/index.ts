// Partners (res.partner): the customers trial requests turn into.
import type { Feature } from '../feature.js';
import { partnerModel } from './partner-models.js';
import { registerPartnerRoutes } from './partner-routes.js';

export const partners: Feature = {
  name: 'partners',
  models: [partnerModel],
  routes: registerPartnerRoutes,
};

// What other features use from this one: they import it from here, never from the files.
export { findOrCreatePartner, normalizeEmail } from './partner-service.js';
