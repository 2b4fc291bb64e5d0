// The cluster store's schema (P22), created and migrated by the node itself: each migration is
// applied once, in order, in one transaction with the version it brings, under an advisory lock
// so that instances starting together do not apply one twice. A database whose version is newer
// than this build knows is refused: an older build must not write to a layout it does not know.
//
// Keys sort as LMDB sorts them (bytewise over UTF-8: COLLATE "C"), so that every range the node
// scans reads the same rows in the same order on either store.
import type pg from 'pg';

/** path_append's parameters, version 3 on. */
const APPEND_PARAMETERS = `
    holder text, fence_partitions integer[], fence_epochs bigint[],
    first_partitions integer[], first_seqs bigint[],
    partitions integer[], seqs bigint[], record_blob bytea, record_lens integer[],
    claim_tables text[], claim_keys text[], claim_blob bytea, claim_lens integer[],
    claim_untils bigint[],
    put_tables text[], put_keys text[], put_blob bytea, put_lens integer[],
    del_tables text[], del_keys text[], notes text[]
  `;

/**
 * path_append of version 3 on (see there), `verb` creating or replacing it; `claimable` filters
 * the claims the commit may take (version 4: only those whose own time is ahead).
 */
function appendFunction(verb: 'create' | 'create or replace', claimable: string): string {
  return `
  ${verb} function path_append(${APPEND_PARAMETERS}) returns void language plpgsql as $$
  declare
    held integer;
    broken record;
    taken record;
    now_ms bigint := (extract(epoch from clock_timestamp()) * 1000)::bigint;
    records bytea[] := path_split(record_blob, record_lens);
    claim_bytes bytea[] := path_split(claim_blob, claim_lens);
    put_bytes bytea[] := path_split(put_blob, put_lens);
  begin
    if holder is not null then
      select count(*) into held from (
        select 1 from leases l join unnest(fence_partitions, fence_epochs) as f(p, e)
          on l.partition = f.p
        where l.owner = holder and l.epoch = f.e
        for share of l
      ) as fenced;
      if held <> cardinality(fence_partitions) then
        raise exception 'path-node: a partition of this commit is no longer leased to %', holder
          using errcode = 'PN001';
      end if;
    end if;
    select f.p, f.low, exists (select 1 from records r where r.partition = f.p and r.seq >= f.low)
        as overlap
      into broken
      from unnest(first_partitions, first_seqs) as f(p, low)
      where exists (select 1 from records r where r.partition = f.p and r.seq >= f.low)
        or (f.low > 1 and not exists (
          select 1 from records r where r.partition = f.p and r.seq = f.low - 1))
      limit 1;
    if found then
      raise exception 'path-node: the records of partition % do not follow on', broken.p
        using errcode = 'PN002',
          detail = broken.p::text || case when broken.overlap then ' overlap' else ' gap' end;
    end if;
    with c as (
      insert into rows (tbl, key, bytes, until)
        select * from unnest(claim_tables, claim_keys, claim_bytes, claim_untils)
          as c(tbl, key, bytes, until) ${claimable} order by c.tbl, c.key
        on conflict (tbl, key) do update set bytes = excluded.bytes, until = excluded.until
          where rows.until is not null and rows.until <= now_ms
        returning rows.tbl, rows.key
    ) select x.tbl, x.key into taken from unnest(claim_tables, claim_keys) as x(tbl, key)
      where not exists (select 1 from c where c.tbl = x.tbl and c.key = x.key)
      limit 1;
    if found then
      raise exception 'path-node: a claim of this commit is another commit''s'
        using errcode = 'PN003', detail = taken.tbl || ' ' || taken.key;
    end if;
    insert into records (partition, seq, bytes)
      select * from unnest(partitions, seqs, records);
    delete from rows r using unnest(del_tables, del_keys) as d(tbl, key)
      where r.tbl = d.tbl and r.key = d.key;
    insert into rows (tbl, key, bytes)
      select * from unnest(put_tables, put_keys, put_bytes)
      on conflict (tbl, key) do update set bytes = excluded.bytes, until = null;
    -- Told to every instance when, and only if, this commit is (postgres-log.ts, Note).
    perform pg_notify('path_changes', n) from unnest(notes) as n;
  end
  $$;
  `;
}

/** One step of the layout, applied once: the statements of version `index + 1`. */
export const MIGRATIONS: readonly string[] = [
  `
  create table records (
    partition integer not null,
    seq bigint not null,
    bytes bytea not null,
    primary key (partition, seq)
  );
  create table snapshots (
    partition integer primary key,
    bytes bytea not null
  );
  create table rows (
    tbl text not null,
    key text collate "C" not null,
    bytes bytea not null,
    primary key (tbl, key)
  );
  create table instances (
    id text primary key,
    address text not null,
    seen_at timestamptz not null,
    -- What every instance of one cluster must share (src/cluster/leases.ts, fingerprint).
    fingerprint text not null
  );
  create table leases (
    partition integer primary key,
    owner text,
    epoch bigint not null default 0,
    expires_at timestamptz not null default '-infinity'
  );
  -- Requests with an idempotency key in flight on some instance (P7 across instances): a claim
  -- lapses at 'until', should its instance die. Unlogged: a claim is worth nothing after a
  -- crash of the database, which ends every request in flight.
  create unlogged table flights (
    scope text primary key,
    until timestamptz not null
  );
  -- Partitions leased to instances (src/cluster/leases.ts), one row each.
  insert into leases (partition) select generate_series(0, 255);
  -- One commit of a command (or of a group of them): its records and its table rows, or nothing.
  -- Fenced (P22): with a holder, every partition in fence_partitions must be leased to
  -- it at the epoch given, checked under a share lock on its lease row, so that a takeover
  -- (which raises the epoch) waits for this commit or makes it fail. Without a holder (the
  -- command line's writes, which touch no partition's records) nothing is fenced.
  create function path_append(
    holder text, fence_partitions integer[], fence_epochs bigint[],
    partitions integer[], seqs bigint[], records bytea[],
    put_tables text[], put_keys text[], put_bytes bytea[],
    del_tables text[], del_keys text[], notes text[]
  ) returns void language plpgsql as $$
  declare
    held integer;
  begin
    if holder is not null then
      select count(*) into held from (
        select 1 from leases l join unnest(fence_partitions, fence_epochs) as f(p, e)
          on l.partition = f.p
        where l.owner = holder and l.epoch = f.e
        for share of l
      ) as fenced;
      if held <> cardinality(fence_partitions) then
        raise exception 'path-node: a partition of this commit is no longer leased to %', holder
          using errcode = 'PN001';
      end if;
    end if;
    insert into records (partition, seq, bytes)
      select * from unnest(partitions, seqs, records);
    delete from rows r using unnest(del_tables, del_keys) as d(tbl, key)
      where r.tbl = d.tbl and r.key = d.key;
    insert into rows (tbl, key, bytes)
      select * from unnest(put_tables, put_keys, put_bytes)
      on conflict (tbl, key) do update set bytes = excluded.bytes;
    -- Told to every instance when, and only if, this commit is (postgres-log.ts, Note).
    perform pg_notify('path_changes', n) from unnest(notes) as n;
  end
  $$;
  `,
  // Version 2 (issue 29): a partition's records follow on from its last committed one, with no
  // gap and no overlap. An append whose commit was in doubt (its connection lost mid-commit) may
  // have landed or not; the writer's next append of that partition must then fail rather than
  // commit beside a hole or over records it never saw. Records are never deleted, so the last
  // committed seq is the partition's highest (0 where it has none).
  `
  create or replace function path_append(
    holder text, fence_partitions integer[], fence_epochs bigint[],
    partitions integer[], seqs bigint[], records bytea[],
    put_tables text[], put_keys text[], put_bytes bytea[],
    del_tables text[], del_keys text[], notes text[]
  ) returns void language plpgsql as $$
  declare
    held integer;
    broken record;
  begin
    if holder is not null then
      select count(*) into held from (
        select 1 from leases l join unnest(fence_partitions, fence_epochs) as f(p, e)
          on l.partition = f.p
        where l.owner = holder and l.epoch = f.e
        for share of l
      ) as fenced;
      if held <> cardinality(fence_partitions) then
        raise exception 'path-node: a partition of this commit is no longer leased to %', holder
          using errcode = 'PN001';
      end if;
    end if;
    select c.p, c.low, c.high, c.n, c.last into broken from (
      select n.p, min(n.s) as low, max(n.s) as high, count(*) as n,
        coalesce((select max(r.seq) from records r where r.partition = n.p), 0) as last
      from unnest(partitions, seqs) as n(p, s) group by n.p
    ) as c
    where c.low <> c.last + 1 or c.high - c.low + 1 <> c.n
    limit 1;
    if found then
      raise exception 'path-node: the records of partition % do not follow on from seq %',
        broken.p, broken.last
        using errcode = 'PN002',
          detail = broken.p::text || case when broken.low > broken.last + 1 or
            broken.high - broken.low + 1 > broken.n then ' gap' else ' overlap' end;
    end if;
    insert into records (partition, seq, bytes)
      select * from unnest(partitions, seqs, records);
    delete from rows r using unnest(del_tables, del_keys) as d(tbl, key)
      where r.tbl = d.tbl and r.key = d.key;
    insert into rows (tbl, key, bytes)
      select * from unnest(put_tables, put_keys, put_bytes)
      on conflict (tbl, key) do update set bytes = excluded.bytes;
    -- Told to every instance when, and only if, this commit is (postgres-log.ts, Note).
    perform pg_notify('path_changes', n) from unnest(notes) as n;
  end
  $$;
  `,
  // Version 3 (issue 29): one round trip per signed write. A request's replay mark (P5) and its
  // idempotency answer (P7) are claims the append itself makes, rather than rows claimed on
  // their own before the command runs: a claimed row keeps `until` (ms), and an append whose
  // claim finds its key held by another commit, with an `until` still ahead (or none), is refused
  // with PN003 naming it, and writes nothing. Claims are inserted in key order, so that two
  // commits claiming the same keys wait for each other in one order. The flights of version 1
  // (a claim per request in flight, on its own round trip) are gone: a late commit and its
  // retry's now contend for the one answer row. A partition's records follow on from its last:
  // each partition's first seq is given, its record before must be there and none from it on.
  `
  alter table rows add column until bigint;
  drop table flights;
  drop function path_append(
    text, integer[], bigint[], integer[], bigint[], bytea[],
    text[], text[], bytea[], text[], text[], text[]
  );
  -- Byte strings come as one bytea and their lengths (path_split): one binary parameter rather
  -- than an array of them, which the client would send as hexadecimal text.
  create function path_split(blob bytea, lens integer[]) returns bytea[]
  language sql immutable as $f$
    select coalesce(array_agg(substring(blob from o::integer for l) order by n), '{}')
    from (
      select l, n, sum(l) over (order by n) - l + 1 as o
      from unnest(lens) with ordinality as u(l, n)
    ) as s
  $f$;
  ${appendFunction('create', '')}
  `,
  // Version 4: a claim whose own time is already past by the database's clock is refused as
  // taken (PN003), like one another commit holds. Claims' times are judged by the database's
  // clock: a request whose replay window ended before its commit would otherwise commit beside
  // the lapsed claim of an earlier sending already answered (P5). The shard refuses such a
  // request by its own clock (Shard.answerBefore); an instance whose clock is behind the
  // database's decided one, and committed it twice (simulator, scripted seed 679284470).
  `
  ${appendFunction('create or replace', 'where c.until > now_ms')}
  `,
];

/** One row's bytes: the log's reader thread and the front end's reads without waiting. */
export const ROW_BYTES = 'select bytes from rows where tbl = $1 and key = $2';

/** A range of one table's keys, each end inclusive or not, in one direction, at most `limit`. */
export interface RowRange {
  table: string;
  start: string | null;
  startInclusive: boolean;
  end: string | null;
  endInclusive: boolean;
  reverse: boolean;
  /** At most this many rows; null for all (`limit null`). */
  limit: number | null;
}

/** One range of a table's keys as SQL conditions, numbered from $2 (the table is $1). */
export function scanStatement(r: RowRange): [string, unknown[]] {
  const where = ['tbl = $1'];
  const values: unknown[] = [r.table];
  if (r.start !== null) {
    values.push(r.start);
    where.push(`key ${r.startInclusive ? '>=' : '>'} $${values.length}`);
  }
  if (r.end !== null) {
    values.push(r.end);
    where.push(`key ${r.endInclusive ? '<=' : '<'} $${values.length}`);
  }
  values.push(r.limit);
  const order = r.reverse ? 'desc' : 'asc';
  const text =
    `select key, bytes from rows where ${where.join(' and ')} ` +
    `order by key ${order} limit $${values.length}`;
  return [text, values];
}

/** A fixed key of pg_advisory_xact_lock: the node's schema changes, one instance at a time. */
const MIGRATION_LOCK = 0x70617468;

export class SchemaError extends Error {
  override name = 'SchemaError';
}

/** Brings the database to this build's layout; returns the version it is at. */
export async function migrate(client: pg.ClientBase): Promise<number> {
  await client.query('begin');
  try {
    await client.query('select pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
    await client.query('create table if not exists path_schema (version integer not null)');
    const found = await client.query<{ version: number }>('select version from path_schema');
    let version = found.rows[0]?.version ?? 0;
    if (found.rows.length === 0) await client.query('insert into path_schema values (0)');
    if (version > MIGRATIONS.length) {
      throw new SchemaError(
        `the database's schema is version ${version}, newer than this build's ` +
          `(${MIGRATIONS.length}): run the build that wrote it, or a newer one`,
      );
    }
    for (; version < MIGRATIONS.length; version++) await client.query(MIGRATIONS[version]!);
    await client.query('update path_schema set version = $1', [version]);
    await client.query('commit');
    return version;
  } catch (error) {
    await client.query('rollback');
    throw error;
  }
}
