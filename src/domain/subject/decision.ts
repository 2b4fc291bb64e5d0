// What the subject's handlers share: the typed input of each command, the decision they return,
// the refusals every part of the aggregate gives in the same words, and the route index entry
// that lets a route find the subject behind an address, attestation or binding id.
import type { DecideContext, Decision, InputOf, Publication } from '../decider.js';
import { refusal, type Refusal } from '../../protocol/errors.js';
import type { subjectCommands } from './schema.js';
import type { SubjectEvent, SubjectState } from './state.js';

export type SubjectCommands = typeof subjectCommands;
export type SubjectCommandName = keyof SubjectCommands & string;
export type Input<K extends SubjectCommandName> = InputOf<SubjectCommands, K>;
export type Result = Decision<SubjectEvent> | Refusal;

/** How the subject decides one command on an existing subject. */
export type Handler<K extends SubjectCommandName> = (
  s: SubjectState,
  input: Input<K>,
  context: DecideContext,
) => Result;

export const notFound = (what: string): Refusal =>
  refusal('path.core.not_found', `no such ${what}`);
export const revokedAddress = (): Refusal =>
  refusal('path.address.revoked', 'this address was revoked');

/** A decision that changes nothing and answers `value` (200). */
export const unchanged = (value: unknown): Result => ({ events: [], answer: { value } });

/** The route index (`route/<id>`): which subject holds an address, attestation or binding id. */
export const routeViewKey = (id: string) => `route/${id}`;

export function routePublication(id: string, subjectId: string): Publication {
  return { key: routeViewKey(id), view: { text: subjectId, signed: false } };
}
