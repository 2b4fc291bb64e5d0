// Follow-ups (STYLE 12, domain/decider.ts): a command that must follow a commit is written in
// that commit, carried out after it, and carried out again from its row after a crash, until
// its aggregate has decided it (the decision removes the row). At least once, so every
// follow-up command is idempotent on its aggregate.
import type { Log } from '../log/log.js';
import { followUpRows } from '../reads/rows.js';
import { storedFollowUp } from './decision.js';
import { planted } from './planted.js';
import type { CommandResult, PendingFollowUp, RoutedCommand } from './types.js';

export interface FollowUpOptions {
  /** Routes a command to its aggregate (the pool, or a shard in tests). */
  submit: (routed: RoutedCommand) => Promise<CommandResult>;
  /**
   * A follow-up that could not be decided now is tried again after this, doubling up to the max.
   */
  retryMs: number;
  retryMaxMs: number;
  /** True once the node is stopping: what is left is carried out at the next start. */
  stopped: () => boolean;
  /** Waits `ms` before the next attempt; absent: a timer of the thread (sim/: its clock). */
  wait?: (ms: number) => Promise<void>;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Carries one follow-up out; an overloaded node (503) or a lost worker call is tried again. */
export async function carryOut(f: PendingFollowUp, options: FollowUpOptions): Promise<void> {
  for (let attempt = 0; !options.stopped(); attempt++) {
    try {
      const result = await options.submit({ ...f.routed, followUp: f.id });
      if (result.reply.status !== 503) return;
    } catch {
      // Not decided: the row stays, and so does the duty.
    }
    await (options.wait ?? sleep)(Math.min(options.retryMs * 2 ** attempt, options.retryMaxMs));
  }
}

/** The follow-ups written by commits and not yet decided by their aggregates (at start). */
export function* unfinishedFollowUps(log: Log): Iterable<PendingFollowUp> {
  if (planted('drop-follow-up-after-crash')) return;
  for (const { key, bytes } of log.scan('followups'))
    yield storedFollowUp(key, followUpRows.read(key, bytes));
}
