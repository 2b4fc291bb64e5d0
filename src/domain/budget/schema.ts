// Commands of a member's budget (P12): the charges of lookups (SPEC D) and payee checks (SPEC F).
import { Type } from '@sinclair/typebox';

const IdentifierType = Type.String({ minLength: 1, maxLength: 64 });
/** Per identifier type: a count of keys or an allowance, in whole lookups. */
const PerType = Type.Record(IdentifierType, Type.Integer({ minimum: 0 }));

/** What the journal keeps of one answer: its type, its hash and whether it was found (P8). */
export const JournaledAnswer = Type.Object({
  identifier_type: IdentifierType,
  identifier_hash: Type.String({ pattern: '^[0-9a-f]{64}$' }),
  found: Type.Boolean(),
});

/** The budget aggregate's commands and their inputs. */
export const budgetCommands = {
  /**
   * Charge one lookup call, all or nothing, and journal its keys. The allowance of each type is
   * a fact the front end holds (base + factor x the member's contributions to its in-memory
   * directory index, P12), so it comes with the command.
   */
  'charge-lookups': Type.Object({
    counts: PerType,
    allowances: PerType,
    answers: Type.Array(JournaledAnswer),
  }),
  /** Charge one payee check against the daily allowance (`payee_check_daily_max`). */
  'charge-payee-check': Type.Object({}),
};
