// Commands of a member's budget (P12): the charges of lookups (SPEC D) and payee checks (SPEC F).
import { Type } from '@sinclair/typebox';

const IdentifierType = Type.String({ minLength: 1, maxLength: 64 });
/** Per identifier type: a count of keys or an allowance, in whole lookups. */
const PerType = Type.Record(IdentifierType, Type.Integer({ minimum: 0 }));

/** The budget aggregate's commands and their inputs. */
export const budgetCommands = {
  /**
   * Charge one lookup call, all or nothing, and journal its keys. The allowance of each type is
   * a fact the front end holds (base + factor x the member's contributions to its in-memory
   * directory index, P12), so it comes with the command. The keys come packed (journal-keys.ts):
   * what the journal keeps of each answer, its type, its hash and whether it was found (P8).
   */
  'charge-lookups': Type.Object({
    counts: PerType,
    allowances: PerType,
    keys: Type.Uint8Array(),
  }),
  /** Charge one payee check against the daily allowance (`payee_check_daily_max`). */
  'charge-payee-check': Type.Object({}),
};
