// A settlement receipt's part of the page for people behind its link (P20, SPEC J): its states
// in words; the page shows the amount received or sent as every page does.
import type { PagePart } from '../../pages/part.js';

export const receiptPage: PagePart = {
  prefix: 'rcp',
  type: 'path.receipt',
  title: 'Settlement receipt',
  states: {
    pending: 'Pending',
    settled: 'Settled',
    failed: 'Failed',
    reversed: 'Reversed',
  },
};
