// The subject aggregate (SPEC B, C, E, F): a subject and everything that hangs off it, decided
// by one writer. The front end normalises, hashes and seals before a command gets here: this
// code only ever sees hashes and sealed values (P8). Who may send each command is a rule of the
// aggregate (SUBJECT_ACCESS below); the handlers are split by concept: records.ts (attestations,
// bindings), addresses.ts (addresses, targets, intents), payee-check.ts (SPEC F).
import type { Caller, CommandOf, DecideContext, Decider, DirectoryRow } from '../decider.js';
import { invalid, refusal } from '../../protocol/errors.js';
import { isoTime } from '../../protocol/time.js';
import {
  addTarget,
  createAddress,
  directoryRowOfAddress,
  listAddresses,
  listTargets,
  revokeAddress,
  revokeTarget,
  rotateAddress,
  setIntent,
  visible,
} from './addresses.js';
import {
  notFound,
  unchanged,
  type Handler,
  type Input,
  type Result,
  type SubjectCommandName,
  type SubjectCommands,
} from './decision.js';
import { subjectViewKey } from './resolver.js';
import { payeeCheck, payeeCheckReads } from './payee-check.js';
import {
  addAttestation,
  addBinding,
  listAttestations,
  readAttestation,
  readBinding,
  revokeAttestation,
} from './records.js';
import { DEFAULT_DISCOVERABILITY, VERIFICATION_METHODS, subjectCommands } from './schema.js';
import {
  addressesOf,
  evolveSubject,
  identifiersOf,
  type IdentifierEntry,
  type SubjectEvent,
  type SubjectState,
} from './state.js';

export { routeViewKey } from './decision.js';
export type { SubjectCommandName };

/**
 * Who may send each command. Another member's subject is answered as absent, never as
 * forbidden: its existence is not disclosed.
 *   owner:   the member that created the subject, or the operator's own member
 *   local:   the operator's own member only; anyone else is refused (403), before any lookup
 *   members: any member (execution-time reads of attestations and bindings, SPEC B)
 *   payers:  a member, or a payment context for the address (the payee check, SPEC F)
 */
export type Access = 'owner' | 'local' | 'members' | 'payers';

export const SUBJECT_ACCESS: Readonly<Record<SubjectCommandName, Access>> = {
  create: 'members',
  'add-identifier': 'owner',
  withdraw: 'owner',
  'set-payee-record': 'local',
  'add-attestation': 'local',
  'read-attestation': 'members',
  'revoke-attestation': 'local',
  'list-attestations': 'local',
  'add-binding': 'local',
  'read-binding': 'members',
  'create-address': 'owner',
  'list-addresses': 'owner',
  'rotate-address': 'owner',
  'revoke-address': 'owner',
  'set-intent': 'owner',
  'add-target': 'local',
  'list-targets': 'owner',
  'revoke-target': 'owner',
  exists: 'owner',
  'payee-check': 'payers',
};

/** What a command names, in its 404 (`no such <what>`). */
const WHAT: Readonly<Record<SubjectCommandName, string>> = {
  create: 'subject',
  'add-identifier': 'subject',
  withdraw: 'subject',
  'set-payee-record': 'subject',
  'add-attestation': 'subject',
  'read-attestation': 'attestation',
  'revoke-attestation': 'attestation',
  'list-attestations': 'subject',
  'add-binding': 'subject',
  'read-binding': 'ownership binding',
  'create-address': 'subject',
  'list-addresses': 'subject',
  'rotate-address': 'address',
  'revoke-address': 'address',
  'set-intent': 'address',
  'add-target': 'address',
  'list-targets': 'address',
  'revoke-target': 'address',
  exists: 'subject',
  'payee-check': 'address',
};

type Command = CommandOf<SubjectCommands>;

export const subjectDecider: Decider<SubjectState, SubjectCommands, SubjectEvent> = {
  type: 'subject',
  // Its identifiers and addresses grow: past state_row_bytes_max it stays in memory (shard.ts).
  passivates: true,
  prefix: 'sub',
  commands: subjectCommands,
  evolve: evolveSubject,

  /**
   * Published with every commit of the subject: a subject made before this view existed gains
   * it at its next change (docs/decisions.md).
   */
  publications: (state: SubjectState) => [
    {
      key: subjectViewKey(state.id),
      view: { text: JSON.stringify({ id: state.id }), signed: false },
    },
  ],

  reads(command: Command): string[] {
    return command.name === 'payee-check' ? payeeCheckReads(command.input) : [];
  },

  decide(command: Command, state: SubjectState | null, context: DecideContext): Result {
    const access = SUBJECT_ACCESS[command.name];
    if (access === 'local' && command.caller?.local !== true) {
      return refusal('path.auth.forbidden', "only the operator's own member may do this");
    }
    if (command.name === 'create') return create(state, command.input, command.caller, context);
    const what = WHAT[command.name];
    if (state === null || !admitted(access, command.caller, state)) return notFound(what);
    if (command.name === 'payee-check') {
      return payeeCheck(state, command.input, command.caller, context);
    }
    return decideOn(state, command, context);
  },
};

function admitted(access: Access, caller: Caller | null, s: SubjectState): boolean {
  if (access === 'payers') return true;
  if (caller === null) return false;
  return access !== 'owner' || caller.local || caller.member === s.owner;
}

type OnSubject = Exclude<Command, { name: 'create' | 'payee-check' }>;

/** One command on an existing subject, its caller admitted. */
function decideOn(s: SubjectState, command: OnSubject, context: DecideContext): Result {
  switch (command.name) {
    case 'add-identifier':
      return addIdentifier(s, command.input, context);
    case 'withdraw':
      return withdraw(s, command.input, context);
    case 'set-payee-record':
      return setPayeeRecord(s, command.input, context);
    case 'exists':
      return unchanged({ id: s.id });
    case 'add-attestation':
      return addAttestation(s, command.input, context);
    case 'read-attestation':
      return readAttestation(s, command.input, context);
    case 'revoke-attestation':
      return revokeAttestation(s, command.input, context);
    case 'list-attestations':
      return listAttestations(s, command.input, context);
    case 'add-binding':
      return addBinding(s, command.input, context);
    case 'read-binding':
      return readBinding(s, command.input, context);
    case 'create-address':
      return createAddress(s, command.input, context);
    case 'list-addresses':
      return listAddresses(s);
    case 'rotate-address':
      return rotateAddress(s, command.input, context);
    case 'revoke-address':
      return revokeAddress(s, command.input, context);
    case 'set-intent':
      return setIntent(s, command.input, context);
    case 'add-target':
      return addTarget(s, command.input, context);
    case 'list-targets':
      return listTargets(s, command.input);
    case 'revoke-target':
      return revokeTarget(s, command.input, context);
  }
}

/** A new subject; the member that creates it owns it. */
function create(
  state: SubjectState | null,
  input: Input<'create'>,
  caller: Caller | null,
  context: DecideContext,
): Result {
  if (caller === null) {
    const message = 'request authentication failed';
    return refusal('path.auth.unauthenticated', message, { reason: 'missing' });
  }
  if (state !== null) return invalid('id', 'subject id already in use');
  const { id, subject_type, external_ref_sealed } = input;
  const created_at = isoTime(context.now);
  const owner = caller.member;
  return {
    events: [
      {
        type: 'created',
        subject: { id, subject_type, owner, external_ref_sealed, created_at },
      },
    ],
    answer: { value: { id, subject_type, created_at }, created: true },
  };
}

/**
 * SPEC B: `verified_at` is set only with one of the type's own methods; discoverability, when
 * not given, is the type's default.
 */
const addIdentifier: Handler<'add-identifier'> = (_s, input, context) => {
  const method = input.verification_method ?? null;
  if (method !== null && !VERIFICATION_METHODS[input.identifier_type].includes(method)) {
    const message = `verification_method is not one of ${input.identifier_type}'s methods`;
    return invalid('verification_method', message);
  }
  const at = isoTime(context.now);
  const identifier: IdentifierEntry = {
    id: input.id,
    identifier_type: input.identifier_type,
    hash: input.hash,
    discoverability: input.discoverability ?? DEFAULT_DISCOVERABILITY[input.identifier_type],
    verification_method: method,
    verified_at: method === null ? null : at,
    created_at: at,
  };
  const { id, identifier_type, discoverability, verified_at } = identifier;
  return {
    events: [{ type: 'identifier_added', identifier }],
    answer: { value: { id, identifier_type, discoverability, verified_at }, created: true },
    directory: [directoryRowOfIdentifier(identifier)],
  };
};

/** Every identifier and address private and out of the index; the subject and its history stay. */
const withdraw: Handler<'withdraw'> = (s, _input, context) => {
  const entries = identifiersOf(s).size + addressesOf(s).filter((a) => a.revoked_at === null).size;
  const event: SubjectEvent = { type: 'withdrawn', at: isoTime(context.now) };
  const next = evolveSubject(s, event);
  return {
    events: [event],
    answer: { value: { subject_id: s.id, withdrawn: true, entries } },
    directory: [
      ...[...identifiersOf(next).values()].map(directoryRowOfIdentifier),
      ...[...addressesOf(next).values()].map(directoryRowOfAddress),
    ],
  };
};

/** The registered name arrives sealed and is never echoed. */
const setPayeeRecord: Handler<'set-payee-record'> = (s, input, context) => {
  const at = isoTime(context.now);
  const { name_sealed, payee_check } = input;
  return {
    events: [{ type: 'payee_record_set', name_sealed, payee_check, at }],
    answer: { value: { subject_id: s.id, payee_check, updated_at: at } },
  };
};

function directoryRowOfIdentifier(i: IdentifierEntry): DirectoryRow {
  return {
    key: `idn/${i.id}`,
    identifierType: i.identifier_type,
    identifierHash: i.hash,
    visibility: visible(i.discoverability),
  };
}
