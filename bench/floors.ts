// The floors of issue 34: what no implementation can avoid for a unit of work, measured with the
// bare library calls on one core of the benchmark's own process, never with the node's code.
// A figure is the floor's CPU per unit over the node's CPU per unit (all its threads, user and
// system, from /proc over the measured load): 1 would be a node that does nothing but the floor.
//
// - A signed durable write: `node:crypto`'s Ed25519 verify of one P5 signature over a request's
//   signing string, and its sign of the bytes of a receipt envelope (about 700).
// - A key of a hash batch: `JSON.parse` of the very request body, `Map.get` of each of its keys in
//   a `Map` of as many keys as the directory holds, and `JSON.stringify` of an answer of the same
//   shape as the node's (its first answer, parsed).
import { generateKeyPairSync, sign, verify } from 'node:crypto';
import { signingString } from '../src/http/auth.js';
import { canonicalJson } from '../src/protocol/canonical.js';
import { freshSigningKey, issueReceipt } from './fixtures.js';
import { measureTasks } from './micro.js';
import { ratio } from './stats.js';

/**
 * A floor read before and after a load: µs of one core per unit, each reading, and the floor
 * itself, the lower of the two (other work on the machine only ever slows a reading down).
 */
export interface Floor {
  beforeUs: number;
  afterUs: number;
  us: number;
}

/** Two readings of a floor around a load; `us` the lower. */
export async function aroundLoad<T>(
  read: () => number,
  load: () => Promise<T>,
): Promise<{ floor: Floor; loaded: T }> {
  const beforeUs = read();
  const loaded = await load();
  const afterUs = read();
  return { floor: { beforeUs, afterUs, us: Math.min(beforeUs, afterUs) }, loaded };
}

export function floorText(name: string, floor: Floor): string {
  const spread = Math.abs(floor.beforeUs - floor.afterUs) / Math.max(floor.beforeUs, floor.afterUs);
  return `floor, ${name}: ${floor.beforeUs.toFixed(1)} us of one core before the load, ${floor.afterUs.toFixed(1)} after (spread ${ratio(spread)})`;
}

/** µs of one core for one signed durable write's cryptography, node:crypto alone. */
export function signedWriteFloorUs(timeMs: number): number {
  const client = generateKeyPairSync('ed25519');
  const operator = generateKeyPairSync('ed25519');
  const request = Buffer.from(
    signingString({
      method: 'POST',
      target: '/api/path/v1/receipts',
      timestamp: new Date().toISOString(),
      idempotencyKey: 'bench-floor',
      bodySha256Hex: '0'.repeat(64),
    }),
    'utf8',
  );
  const signature = sign(null, request, client.privateKey);
  const envelope = envelopeBytes();
  const [task] = measureTasks(
    {
      'node:crypto verify + sign': () => {
        if (!verify(null, request, client.publicKey, signature))
          throw new Error('the floor request does not verify');
        sign(null, envelope, operator.privateKey);
      },
    },
    timeMs,
  );
  return task!.meanUs;
}

/** What the write floor signs: a receipt envelope's canonical JSON, as the node signs it. */
function envelopeBytes(): Buffer {
  const { envelopeText } = issueReceipt(freshSigningKey(), Date.now());
  const { signature: _signature, ...unsigned } = JSON.parse(envelopeText) as Record<
    string,
    unknown
  >;
  return Buffer.from(canonicalJson(unsigned), 'utf8');
}

/** How many bytes the write floor signs, for the report. */
export const signedEnvelopeBytes = (): number => envelopeBytes().length;

/**
 * µs of one core for one key of a hash batch: `JSON.parse` of a body, `Map.get` of each of its
 * keys in `keys`, `JSON.stringify` of `answer`, over the bodies in turn.
 */
export function hashKeyFloorUs(
  bodies: readonly Buffer[],
  answer: unknown,
  keys: ReadonlyMap<string, unknown>,
  timeMs: number,
): number {
  let next = 0;
  let perBatch = 0;
  let found = 0;
  const [task] = measureTasks(
    {
      'JSON.parse(body) + Map.get of each key + JSON.stringify(answer)': () => {
        const body = JSON.parse(bodies[next++ % bodies.length]!.toString('utf8')) as {
          items: { identifier_hash: string }[];
        };
        for (const item of body.items) if (keys.get(item.identifier_hash) !== undefined) found++;
        perBatch = body.items.length;
        if (JSON.stringify(answer).length === 0) throw new Error('empty answer');
      },
    },
    timeMs,
  );
  if (found === 0) throw new Error('the hash floor found no key');
  return task!.meanUs / perBatch;
}

/** The node's CPU per unit in µs: its CPU seconds over the load (every thread) per unit done. */
export function nodeUsPer(processSeconds: number | null, units: number): number | null {
  return processSeconds === null || units <= 0 ? null : (processSeconds * 1e6) / units;
}
