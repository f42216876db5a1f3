// Partners (res.partner): the customers trial requests turn into.
import type { Feature } from '../feature.js';
import { partnerModel } from './partner-models.js';
import { registerPartnerRoutes } from './partner-routes.js';

export const partners: Feature = {
  name: 'partners',
  models: [partnerModel],
  routes: registerPartnerRoutes,
};
