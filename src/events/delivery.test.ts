// The event sweep over the real LMDB log: finished events past their retention are forgotten (the
// outbox row, its delivery state, its expiry row), all of them in one round however many are
// due, a page a write; an event not yet past its retention stays.
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { temporaryLogs } from '../../test/support/lmdb.js';
import { DEFAULT_LIMITS, SWEEP_PAGE_ROWS } from '../config.js';
import type { Log, Table, TableWrite } from '../log/log.js';
import { signingKeyFromSeed } from '../protocol/signing.js';
import { deliveryRows, eventExpiryRows, outboxRows } from '../reads/rows.js';
import { WebhookDelivery } from './delivery.js';

const NOW = Date.parse('2026-11-29T12:00:00Z');
const RETENTION = DEFAULT_LIMITS.events_retention_ms;
/** Over 1,000: what a round of the sweep forgot before it went on to the end. */
const DUE = 2_500;

const logs = temporaryLogs('events');
afterEach(logs.cleanUp);
const freshLog = logs.fresh;

/** What a delivered event leaves: its outbox row, its state, its expiry row. */
function delivered(id: string, finishedAt: number): TableWrite[] {
  const event = { id, event: 'receipt.issued', created_at: new Date(finishedAt).toISOString() };
  const state = {
    url: 'https://hooks.example/in',
    attempts: 1,
    next_at: finishedAt,
    outcome: 'delivered' as const,
    last_status: 204,
    finished_at: finishedAt,
  };
  return [
    outboxRows.write(id, event),
    deliveryRows.write(id, [state]),
    eventExpiryRows.write(eventExpiryRows.key(finishedAt + RETENTION, id), {}),
  ];
}

function sweeper(log: Log, sizes: number[]): WebhookDelivery {
  const watched: Log = Object.create(log) as Log;
  watched.write = (writes: readonly TableWrite[]) => {
    sizes.push(writes.length);
    return log.write(writes);
  };
  return new WebhookDelivery({
    log: watched,
    clock: { now: () => NOW, setTimer: () => ({ cancel: () => undefined }) },
    signer: () => signingKeyFromSeed('11'.repeat(32)),
    secrets: () => [],
    operatorUrls: [],
    dev: false,
    limits: DEFAULT_LIMITS,
    logger: pino({ level: 'silent' }),
  });
}

const keys = (log: Log, table: Table) => [...log.scan(table)].map((r) => r.key);

describe('the event sweep (P11: finished events kept for their retention)', () => {
  it('forgets every finished event past its retention in one round, a page a write', async () => {
    const log = freshLog();
    const due = Array.from({ length: DUE }, (_, i) =>
      delivered(`evt_old${i}`, NOW - RETENTION - i),
    );
    await log.write([...due.flat(), ...delivered('evt_kept', NOW - RETENTION + 60_000)]);
    const sizes: number[] = [];
    await sweeper(log, sizes).sweep();
    expect(keys(log, 'outbox')).toEqual(['evt_kept']);
    expect(keys(log, 'deliveries')).toEqual(['evt_kept']);
    expect(keys(log, 'event_expiry')).toHaveLength(1);
    // Each page: its expiry rows, and each event's outbox row and state.
    expect(Math.max(...sizes)).toBeLessThanOrEqual(3 * SWEEP_PAGE_ROWS);
  });
});
