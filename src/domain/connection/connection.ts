// Connections, mandates and delegations (SPEC K, "States and transitions: Connection and
// delegation"). A connection and the delegations cut from it are one aggregate, so a delegated
// consume moves both sets of counters in one atomic step under a single writer. Each consume
// writes its usage rows in the same commit; the state keeps only counters, so a hot connection
// stays small.
//
// States and where they may move:
//   active -> revoked (connection: either party; delegation: grantor, delegate or parent grantee)
//   revoked: nowhere (revoking again answers the revocation as recorded)
// Past `expires_at` a connection or delegation reads as expired and refuses consumption (410);
// a consume leaves the state active and moves counters.
//
// Who may do what is decided here, by the caller's credential: the local member is the grantor
// (it creates connections and cuts delegations), the grantee consumes a connection, the named
// delegate consumes a delegation. That the subject named by a new connection exists is a fact
// of the subject aggregate: it is read through `reads`, never by the route.
import type { Caller, CommandOf, DecideContext, Decider, Decision } from '../decider.js';
import { answer } from '../decider.js';
import { invalid, refusal, type Refusal } from '../../protocol/errors.js';
import { isoTime } from '../../protocol/time.js';
import { consume } from './consume.js';
import { create, createDelegation, subjectViewKey } from './grant.js';
import { connectionObject, delegationObject, revokedView, signedRead } from './objects.js';
import { connectionCommands } from './schema.js';
import {
  delegationsOf,
  evolveConnection,
  type ConnectionEvent,
  type ConnectionState,
} from './state.js';

export type { ConnectionEvent, ConnectionState, DelegationState } from './state.js';
export { routeViewKey, subjectViewKey } from './grant.js';

type Commands = typeof connectionCommands;
type Command = CommandOf<Commands>;
type DelegationCommand = Extract<Command, { input: { delegation: string } }>;
type Result = Decision<ConnectionEvent> | Refusal;
/** Who the caller is to a connection: the local member is its grantor. */
type Party = 'grantor' | 'grantee' | null;

const notFound = (what: string) => refusal('path.core.not_found', `no such ${what}`);
const forbidden = (message = 'not a party to this connection') =>
  refusal('path.auth.forbidden', message);

export const connectionDecider: Decider<ConnectionState, Commands, ConnectionEvent> = {
  type: 'connection',
  // Its delegations grow: past state_row_bytes_max it stays in memory (shard.ts).
  passivates: true,
  prefix: 'con',
  commands: connectionCommands,

  reads(command: Command): string[] {
    return command.name === 'create' ? [subjectViewKey(command.input.subject_id)] : [];
  },

  decide(command: Command, state: ConnectionState | null, context: DecideContext): Result {
    if (command.name === 'create') {
      if (state !== null) return invalid('reference', 'reference already in use');
      const subject = context.views.get(subjectViewKey(command.input.subject_id));
      return create(command.input, command.caller, subject, context);
    }
    // Only the local member cuts a delegation: said before whether the connection exists.
    if (command.name === 'create-delegation' && command.caller?.local !== true) {
      return forbidden('only the grantor cuts a delegation');
    }
    if (state === null || command.caller === null) {
      return notFound('delegation' in command.input ? 'delegation' : 'connection');
    }
    const caller = command.caller;
    const party: Party = caller.local
      ? 'grantor'
      : caller.member === state.grantee
        ? 'grantee'
        : null;
    switch (command.name) {
      case 'read':
        if (party === null) return forbidden();
        return signedRead(connectionObject(state, context.now), context);
      case 'usage':
        return party === null ? forbidden() : answer({ count: state.usage_count });
      case 'consume':
        if (party !== 'grantee') return forbidden('only the grantee consumes a connection');
        return consume(state, command.input, context, null);
      case 'revoke': {
        if (party === null) return forbidden();
        if (state.revoked_at !== null) return answer(revokedView(state));
        const at = isoTime(context.now);
        const by = caller.member;
        return {
          events: [{ type: 'revoked', at, by }],
          answer: { value: revokedView({ ...state, revoked_at: at, revoked_by: by }) },
        };
      }
      case 'create-delegation':
        return createDelegation(state, command.input, context);
      default:
        return onDelegation(command, state, caller, party, context);
    }
  },

  evolve: evolveConnection,
};

/** A command on one delegation: its parties are the grantor, the parent grantee, the delegate. */
function onDelegation(
  command: DelegationCommand,
  state: ConnectionState,
  caller: Caller,
  party: Party,
  context: DecideContext,
): Result {
  const d = delegationsOf(state).get(command.input.delegation);
  if (d === undefined) return notFound('delegation');
  const isParty = party !== null || caller.member === d.delegate;
  switch (command.name) {
    case 'read-delegation':
      return isParty ? signedRead(delegationObject(state, d, context.now), context) : forbidden();
    case 'usage-delegation':
      return isParty ? answer({ count: d.usage_count }) : forbidden();
    case 'consume-delegation':
      if (caller.member !== d.delegate) {
        return forbidden('only the named delegate consumes a delegation');
      }
      return consume(state, command.input, context, d);
    case 'revoke-delegation': {
      if (!isParty) return forbidden();
      if (d.revoked_at !== null) return answer(revokedView(d));
      const at = isoTime(context.now);
      const by = caller.member;
      return {
        events: [{ type: 'delegation_revoked', reference: d.reference, at, by }],
        answer: { value: revokedView({ ...d, revoked_at: at, revoked_by: by }) },
      };
    }
  }
}
