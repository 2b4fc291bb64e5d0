// The throwaway PostgreSQL of the test run (scripts/throwaway-postgres.ts, shared with the
// benchmarks).
export { freshDatabase, serverBin, startPostgres, type Postgres } from '../../scripts/throwaway-postgres.js';
