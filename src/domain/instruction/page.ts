// A payment instruction's part of the page for people behind its link (P20, SPEC G): its states
// in words; the page shows its amount and expiry as every page does.
import type { PagePart } from '../../pages/part.js';

export const instructionPage: PagePart = {
  prefix: 'ins',
  type: 'path.instruction',
  title: 'Payment instruction',
  states: {
    open: 'Open: awaiting payment',
    used: 'Used',
    revoked: 'Revoked',
    expired: 'Expired',
  },
};
