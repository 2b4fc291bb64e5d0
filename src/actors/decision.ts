// What the runtime makes of a decision: the HTTP answer (status from the one error table and the
// `created` flag, P7), the stored views, and every row written in the command's commit, each
// framed by its codec (reads/rows.ts). Deciders say what happened; this says how it is kept.
import { TypeCompiler, type TypeCheck } from '@sinclair/typebox/compiler';
import type { TSchema } from '@sinclair/typebox';
import type {
  AnyDecider,
  Answer,
  CommandSchemas,
  Decision,
  OutboxEvent,
  Publication,
  ReadView,
  View,
} from '../domain/decider.js';
import type { RecordPosition, Table, TableWrite } from '../log/log.js';
import {
  directoryChangeRows,
  followUpRows,
  idempotencyOrderRows,
  idempotencyRows,
  outboxRows,
  replayRows,
  type StoredFollowUp,
} from '../reads/rows.js';
import { directoryRows } from '../domain/subject/directory-rows.js';
import { journalRows } from '../domain/budget/journal-rows.js';
import { usageRows } from '../domain/connection/usage-rows.js';
import { encodeView, type View as StoredView } from '../reads/views.js';
import { once } from '../once.js';
import {
  errorBody,
  expiredRefusal,
  refusal,
  statusOf,
  type ErrorCode,
  type Refusal,
} from '../protocol/errors.js';
import type { ClaimKind, CommandResult, PendingFollowUp, Reply, RoutedCommand } from './types.js';

export function errorReply(r: Refusal): Reply {
  return { status: statusOf(r.code), body: errorBody(r), signed: false };
}

/** P7: 201 for a call that created a resource, 200 for every other success. */
export function replyOf(answer: Answer, meta?: Record<string, unknown>): Reply {
  const status = answer.created === true ? 201 : 200;
  const reply: Reply =
    'text' in answer
      ? { status, body: answer.text, signed: answer.signed }
      : { status, body: JSON.stringify(answer.value), signed: false };
  if (meta !== undefined) reply.meta = meta;
  return reply;
}

/** A view as served: its text, or the refusal of a gone object with its status from the table. */
export function viewReply(view: View): Reply {
  if ('gone' in view) return errorReply(view.gone);
  return {
    status: 200,
    body: view.text,
    signed: view.signed,
    ...(view.expiry === undefined ? {} : { expiry: view.expiry }),
  };
}

/**
 * A stored view as a decision reads it: a gone object (or one past its deadline) as its refusal.
 */
export function readView(view: StoredView, now: number): ReadView {
  if (view.expiry !== null && now >= view.expiry.at) {
    return { text: null, gone: expiredRefusal(view.expiry.code as ErrorCode) };
  }
  if (view.status === 200) return { text: view.body.toString('utf8'), gone: null };
  const { error } = JSON.parse(view.body.toString('utf8')) as { error: Refusal };
  return { text: null, gone: error };
}

/** The checks of every decider's command inputs, each compiled once, when first used. */
export class CommandChecks {
  /** Each command's check, by aggregate and command, compiled when its first command comes. */
  private readonly checks = new Map<string, () => TypeCheck<TSchema>>();

  constructor(deciders: readonly AnyDecider[]) {
    for (const d of deciders)
      for (const [name, schema] of Object.entries(d.commands as CommandSchemas))
        this.checks.set(
          `${d.type}.${name}`,
          once(() => TypeCompiler.Compile(schema)),
        );
  }

  /**
   * Null when the command is one its aggregate takes, with the input its schema describes. The
   * front end builds commands from validated bodies, so a mismatch is a defect of the node: it is
   * refused as internal, with the aggregate, command and field named for the log.
   */
  problem(routed: RoutedCommand): Refusal | null {
    const check = this.checks.get(`${routed.aggregate}.${routed.command.name}`)?.();
    if (check === undefined)
      return refusal('path.core.not_found', `no such operation on ${routed.aggregate}`);
    if (check.Check(routed.command.input)) return null;
    const first = check.Errors(routed.command.input).First();
    const field = `${first?.path ?? ''}: ${first?.message ?? 'invalid'}`;
    return refusal('path.core.internal', 'internal error', {
      defect: `${routed.aggregate}.${routed.command.name} input ${field}`,
    });
  }
}

/**
 * The events of a decision the outbox keeps: those with somewhere to go (P11). An event with no
 * target (none of its own, and the node has no operator endpoint) would be forgotten by delivery
 * as soon as it was read, with nothing to show or resend (events/delivery.ts): it is not written.
 */
export function keptOutbox(decision: Decision<unknown>, operatorWebhooks: boolean): OutboxEvent[] {
  const events = decision.outbox ?? [];
  return operatorWebhooks ? events : events.filter((e) => (e.targets?.length ?? 0) > 0);
}

/** Everything one decided command writes in its commit besides its record. */
export function decisionWrites(options: {
  decision: Decision<unknown>;
  /** The decision's events the outbox keeps (keptOutbox). */
  outbox: readonly OutboxEvent[];
  publications: readonly Publication[];
  routed: RoutedCommand;
  reply: Reply;
  now: number;
  newId: () => string;
  followUps: readonly PendingFollowUp[];
  /** The record these rows are written with: views and usage rows name it (issue 28). */
  position: RecordPosition;
  /** How long an idempotency answer is kept (P7): its claim holds that long. */
  retentionMs: number;
  /**
   * Embedded mode: the keys the decision changed in the directory are listed in a row of their
   * own, at the record's position (directoryChangeRows), for the next start to read again.
   */
  directoryChanges?: boolean;
}): TableWrite[] {
  const { decision, routed, position } = options;
  const writes: TableWrite[] = options.publications.map((pub) => ({
    table: 'views',
    key: pub.key,
    bytes: pub.view === null ? null : encodeView(viewReply(pub.view), position),
  }));
  for (const event of options.outbox) writes.push(outboxRows.write(event.id, event));
  for (const row of decision.directory ?? []) writes.push(directoryRows.change(row));
  if (options.directoryChanges === true && (decision.directory?.length ?? 0) > 0) {
    const hashes = decision.directory!.map((row) => row.identifierHash);
    writes.push(directoryChangeRows.row(position, hashes));
  }
  for (const entry of decision.journal ?? [])
    writes.push(journalRows.entry(entry, options.newId()));
  for (const entry of decision.usage ?? []) writes.push(usageRows.entry(entry, position));
  for (const f of options.followUps) {
    const stored: StoredFollowUp = {
      aggregate: f.routed.aggregate,
      key: f.routed.key,
      name: f.routed.command.name,
      input: f.routed.command.input,
      caller: f.routed.command.caller,
    };
    writes.push(followUpRows.write(f.id, stored));
  }
  if (routed.idempotency !== undefined) {
    const { scope, requestHash } = routed.idempotency;
    const { status, body, signed } = options.reply;
    const answer = { scope, requestHash, status, body, signed, at: options.now };
    writes.push(
      { ...idempotencyRows.write(scope, answer), until: options.now + options.retentionMs },
      idempotencyOrderRows.entry(options.now, scope),
    );
  }
  if (routed.replay !== undefined) writes.push(replayRows.claim(routed.replay));
  if (routed.followUp !== undefined)
    writes.push({ table: 'followups', key: routed.followUp, bytes: null });
  return writes;
}

/**
 * What a command's commit claims for its request (TableWrite.until): its replay mark (P5) and its
 * idempotency answer (P7). The log refuses a commit whose claim another commit holds.
 */
export function claimsOf(routed: RoutedCommand): { table: Table; key: string; kind: ClaimKind }[] {
  const claims: { table: Table; key: string; kind: ClaimKind }[] = [];
  if (routed.replay !== undefined)
    claims.push({ table: replayRows.table, key: routed.replay.key, kind: 'replay' });
  if (routed.idempotency !== undefined) {
    const { scope } = routed.idempotency;
    claims.push({ table: idempotencyRows.table, key: scope, kind: 'idempotency' });
  }
  return claims;
}

/** The answer of a command not run because its request's claim was another commit's. */
export function takenResult(kind: ClaimKind): CommandResult {
  const reply = { status: 409, body: '', signed: false };
  return { reply, committed: false, outbox: [], directory: [], followUps: [], taken: kind };
}

/** The follow-ups of a decision as commands to route, each with the id of its row. */
export function pendingFollowUps(
  decision: Decision<unknown>,
  newId: () => string,
): PendingFollowUp[] {
  return (decision.followUps ?? []).map((f) => ({
    id: newId(),
    routed: {
      aggregate: f.aggregate,
      key: f.key,
      command: { name: f.name, input: f.input, caller: null },
    },
  }));
}

/** A stored follow-up, routed again (recovery). */
export function storedFollowUp(id: string, stored: StoredFollowUp): PendingFollowUp {
  return {
    id,
    routed: {
      aggregate: stored.aggregate,
      key: stored.key,
      command: { name: stored.name, input: stored.input, caller: stored.caller },
    },
  };
}
