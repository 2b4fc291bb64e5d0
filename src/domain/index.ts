// Every aggregate the node runs, for the actor runtime.
import type { Decider } from '../actors/types.js';
import { receiptDecider } from './receipt/receipt.js';
import { subjectDecider } from './subject/subject.js';

export const DECIDERS: readonly Decider<any, any>[] = [receiptDecider, subjectDecider];
