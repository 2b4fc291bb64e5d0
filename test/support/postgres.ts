// The throwaway PostgreSQL of the test run (scripts/throwaway-postgres.ts, shared with the
// benchmarks), without fsync: the tests crash its processes, never the machine (startPostgres).
import { startPostgres as startServer, type Postgres } from '../../scripts/throwaway-postgres.js';

export { freshDatabase, serverBin, type Postgres } from '../../scripts/throwaway-postgres.js';

export const startPostgres = (): Promise<Postgres> => startServer({ fsync: false });
