// Shards for the cluster tests (P22): every decider, every partition, a clock that moves only
// when told and ids made in order, over whichever log a test gives; and the receipt commands the
// tests drive them with. The Shard class itself comes from the test (the compiled one where the
// log is compiled, so that errors are one class).
import type { ShardOptions } from '../../src/actors/shard.js';
import type { RoutedCommand } from '../../src/actors/types.js';
import { SimulatedClock } from '../../src/clock.js';
import { DEFAULT_LIMITS } from '../../src/config.js';
import { DECIDERS } from '../../src/domain/index.js';
import { PARTITION_COUNT, type Log } from '../../src/log/log.js';
import { signingKeyFromSeed } from '../../src/protocol/signing.js';

const SIGNER = signingKeyFromSeed(
  '9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60',
);
export const LOCAL = { member: 'local', local: true };
const EUR = { rail: 'book', asset_type: 'fiat', asset_code: 'EUR' };

/**
 * A shard's options over `log`. Ids count up from `made` (shared between shards that must not
 * make the same one); a fatal error is thrown unless `onFatal` says otherwise.
 */
export function fixedShard(
  log: Log,
  options: {
    member?: string;
    made?: { count: number };
    snapshotEveryRecords?: number;
    onFatal?: (error: unknown) => void;
    /** Where the clock starts (ms); absent: 2026-11-21T12:00:00Z. */
    startAt?: number;
  } = {},
): { options: ShardOptions; clock: SimulatedClock } {
  const made = options.made ?? { count: 0 };
  const clock = new SimulatedClock(options.startAt ?? Date.parse('2026-11-21T12:00:00Z'));
  const newId = (prefix: string) => `${prefix}_${(++made.count).toString(16).padStart(32, '0')}`;
  return {
    clock,
    options: {
      partitions: Array.from({ length: PARTITION_COUNT }, (_, p) => p),
      log,
      deciders: DECIDERS,
      clock,
      member: options.member ?? 'local',
      signer: () => SIGNER,
      newId: newId as ShardOptions['newId'],
      snapshotEveryRecords: options.snapshotEveryRecords ?? 1_000,
      mailboxDepthMax: 64,
      limits: DEFAULT_LIMITS,
      onFatal:
        options.onFatal ??
        ((error) => {
          throw error;
        }),
    },
  };
}

/** A payer receipt issued by the operator's own member. */
export const issueReceipt = (reference: string): RoutedCommand => ({
  aggregate: 'receipt',
  key: reference,
  command: { name: 'issue', input: { reference, issued_by: 'payer', via: EUR }, caller: LOCAL },
});

/** The same receipt settled. */
export const settleReceipt = (reference: string): RoutedCommand => ({
  aggregate: 'receipt',
  key: reference,
  command: {
    name: 'transition',
    input: { to: 'settled', rail_references: [{ type: 'book_entry', value: 'x' }] },
    caller: LOCAL,
  },
});
