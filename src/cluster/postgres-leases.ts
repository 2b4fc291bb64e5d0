// The leases table on PostgreSQL (P22): the statements an instance's lease rounds make
// (leases.ts), one connection per instance. Times are the database's (`now()`), so the instances'
// clocks need not agree; the epoch of a partition rises at every takeover, and the database
// checks it under a lock on the lease row in the same transaction as each append
// (postgres-log.ts, Fence).
import type pg from 'pg';
import { clusterModules } from '../log/postgres-log.js';
import { connectionSettings, findPrimary } from '../log/unavailable.js';
import type { LeaseSession, LeaseStore, OwnerRow, LeaseRow } from './leases.js';

type Rows = { partition: number; epoch: string }[];
const leaseRows = (rows: Rows): LeaseRow[] =>
  rows.map((r) => ({ partition: r.partition, epoch: BigInt(r.epoch) }));

/** Opens connections to the cluster's database at `url`, its primary found first. */
export function postgresLeases(url: string): LeaseStore {
  return {
    async open(lost) {
      const { pg } = await clusterModules();
      await findPrimary(url);
      const client = new pg.Client(connectionSettings(url));
      client.on('error', lost);
      client.on('end', lost);
      try {
        await client.connect();
      } catch (error) {
        void client.end().catch(() => undefined);
        throw error;
      }
      return new PostgresLeaseSession(client);
    },
  };
}

class PostgresLeaseSession implements LeaseSession {
  constructor(private readonly client: pg.Client) {}

  async strangers(leaseMs: number, fingerprint: string): Promise<boolean> {
    const others = await this.client.query<{ id: string }>(
      'select id from instances ' +
        "where seen_at > now() - $1 * interval '1 millisecond' and fingerprint <> $2 limit 1",
      [leaseMs, fingerprint],
    );
    return others.rows.length > 0;
  }

  async renew(instance: string, leaseMs: number, partitions: number[]): Promise<LeaseRow[]> {
    const renewed = await this.client.query<Rows[number]>(
      "update leases set expires_at = now() + $2 * interval '1 millisecond' " +
        'where owner = $1 and partition = any($3) returning partition, epoch',
      [instance, leaseMs, partitions],
    );
    return leaseRows(renewed.rows);
  }

  async heartbeat(
    seen: { instance: string; address: string; fingerprint: string },
    leaseMs: number,
    forgetMs: number,
  ): Promise<number> {
    await this.client.query(
      'insert into instances (id, address, seen_at, fingerprint) values ($1, $2, now(), $3) ' +
        'on conflict (id) do update set address = excluded.address, seen_at = now()',
      [seen.instance, seen.address, seen.fingerprint],
    );
    const live = await this.client.query<{ n: string }>(
      "select count(*) as n from instances where seen_at > now() - $1 * interval '1 millisecond'",
      [leaseMs],
    );
    await this.client.query(
      "delete from instances where seen_at < now() - $1 * interval '1 millisecond'",
      [forgetMs],
    );
    return Number(live.rows[0]!.n);
  }

  async take(instance: string, count: number, leaseMs: number): Promise<LeaseRow[]> {
    const taken = await this.client.query<Rows[number]>(
      'with free as (select partition from leases ' +
        'where owner is null or expires_at < now() order by partition limit $2 ' +
        'for update skip locked) ' +
        'update leases l set owner = $1, epoch = l.epoch + 1, ' +
        "expires_at = now() + $3 * interval '1 millisecond' " +
        'from free where l.partition = free.partition returning l.partition, l.epoch',
      [instance, count, leaseMs],
    );
    return leaseRows(taken.rows);
  }

  async give(instance: string, partitions: number[]): Promise<void> {
    await this.client.query(
      "update leases set owner = null, expires_at = '-infinity' " +
        'where owner = $1 and partition = any($2)',
      [instance, partitions],
    );
  }

  async owners(): Promise<OwnerRow[]> {
    const rows = await this.client.query<OwnerRow & { left_ms: number }>(
      'select l.partition, l.owner, i.address, ' +
        'extract(epoch from l.expires_at - now())::float8 * 1000 as left_ms ' +
        'from leases l join instances i on i.id = l.owner where l.expires_at > now()',
    );
    return rows.rows.map((r) => ({ ...r, leftMs: r.left_ms }));
  }

  async leave(instance: string): Promise<void> {
    await this.client.query(
      "update leases set owner = null, expires_at = '-infinity' where owner = $1",
      [instance],
    );
    await this.client.query('delete from instances where id = $1', [instance]);
  }

  async end(): Promise<void> {
    await this.client.end();
  }
}
