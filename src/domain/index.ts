// Every aggregate the node runs, for the actor runtime.
import type { AnyDecider } from './decider.js';
import { budgetDecider } from './budget/budget.js';
import { checkoutDecider } from './checkout/checkout.js';
import { connectionDecider } from './connection/connection.js';
import { instructionDecider } from './instruction/instruction.js';
import { receiptDecider } from './receipt/receipt.js';
import { requestDecider } from './request/request.js';
import { subjectDecider } from './subject/subject.js';

export const DECIDERS: readonly AnyDecider[] = [
  receiptDecider,
  subjectDecider,
  requestDecider,
  instructionDecider,
  checkoutDecider,
  budgetDecider,
  connectionDecider,
];
