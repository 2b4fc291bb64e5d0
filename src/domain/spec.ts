// Deciders as specifications (tests only): given the events an aggregate has seen, when a
// command arrives, then these events, this answer or this refusal. The decider runs alone: no
// runtime, no log, a fixed clock and ids, views given as data. Every input is checked against
// the aggregate's own schema first, as the runtime does.
import { TypeCompiler } from '@sinclair/typebox/compiler';
import { expect } from 'vitest';
import { DEFAULT_LIMITS } from '../config.js';
import type { ErrorCode, Refusal } from '../protocol/errors.js';
import type { ReferencePrefix } from '../protocol/ids.js';
import { signingKeyFromSeed } from '../protocol/signing.js';
import {
  isRefusal,
  type Caller,
  type CommandSchemas,
  type DecideContext,
  type Decider,
  type Decision,
  type InputOf,
  type ReadView,
} from './decider.js';

export const SPEC_NOW = Date.parse('2026-11-21T12:00:00Z');
export const LOCAL: Caller = { member: 'local', local: true };
export const BETA: Caller = { member: 'beta', local: false };
/** RFC 8032 TEST 1's seed: a fixed signer, so signed answers are reproducible. */
const SEED = '9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60';

export interface SpecContext {
  now?: number;
  views?: Record<string, ReadView>;
  member?: string;
  limits?: Partial<DecideContext['limits']>;
  dev?: boolean;
  unseal?: (sealed: string) => string;
}

export interface Outcome<S, E> {
  decision: Decision<E> | Refusal;
  /** The state after the events, when the decision committed some. */
  state: S | null;
  then(expected: E[] | ((events: E[]) => void)): Decision<E>;
  thenRefused(code: ErrorCode, detail?: Record<string, unknown>): Refusal;
  /** The decision changed nothing and answered (a read, a repeat). */
  thenNothing(): Decision<E>;
}

export function deciderSpec<S, C extends CommandSchemas, E>(decider: Decider<S, C, E>) {
  const checks = new Map(
    Object.entries(decider.commands).map(([name, schema]) => [name, TypeCompiler.Compile(schema)]),
  );
  let ids = 0;
  return {
    given(events: E[], context: SpecContext = {}) {
      const before = events.reduce<S | null>((state, event) => decider.evolve(state, event), null);
      return {
        state: before,
        when<K extends keyof C & string>(
          name: K,
          input: InputOf<C, K>,
          caller: Caller | null = LOCAL,
        ): Outcome<S, E> {
          const check = checks.get(name)!;
          const errors = [...check.Errors(input)].map((e) => `${e.path} ${e.message}`);
          expect(check.Check(input), `input of ${decider.type}.${name}: ${errors.join('; ')}`).toBe(
            true,
          );
          const decision = decider.decide({ name, input, caller } as never, before, {
            now: context.now ?? SPEC_NOW,
            member: context.member ?? 'local',
            signer: signingKeyFromSeed(SEED),
            newId: (prefix: ReferencePrefix) =>
              `${prefix}_${(++ids).toString(16).padStart(32, '0')}`,
            limits: { ...DEFAULT_LIMITS, ...context.limits },
            dev: context.dev ?? false,
            views: new Map(Object.entries(context.views ?? {})),
            ...(context.unseal === undefined ? {} : { unseal: context.unseal }),
          });
          const after = isRefusal(decision)
            ? before
            : decision.events.reduce<S | null>((s, e) => decider.evolve(s, e), before);
          return outcome(decision, after);
        },
      };
    },
  };
}

function outcome<S, E>(decision: Decision<E> | Refusal, state: S | null): Outcome<S, E> {
  const decided = (): Decision<E> => {
    expect(isRefusal(decision), `refused: ${JSON.stringify(decision)}`).toBe(false);
    return decision as Decision<E>;
  };
  return {
    decision,
    state,
    then(expected) {
      const d = decided();
      if (typeof expected === 'function') expected(d.events);
      else expect(d.events).toEqual(expected);
      return d;
    },
    thenRefused(code, detail) {
      expect(isRefusal(decision), `not refused: ${JSON.stringify(decision)}`).toBe(true);
      const r = decision as Refusal;
      expect(r.code).toBe(code);
      if (detail !== undefined) expect(r.detail).toMatchObject(detail);
      return r;
    },
    thenNothing() {
      const d = decided();
      expect(d.events).toEqual([]);
      return d;
    },
  };
}

/** A view as a decision reads it. */
export const viewOf = (value: unknown): ReadView => ({ text: JSON.stringify(value), gone: null });
export const goneView = (gone: Refusal): ReadView => ({ text: null, gone });
