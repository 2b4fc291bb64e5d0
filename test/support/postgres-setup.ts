// vitest's global set-up: one throwaway PostgreSQL for the whole run (postgres.ts), its URL handed
// to the tests as `inject('postgresUrl')`; stopped and removed when the run ends.
import type { TestProject } from 'vitest/node';
import { startPostgres } from './postgres.js';

declare module 'vitest' {
  export interface ProvidedContext {
    postgresUrl: string;
  }
}

export default async function setup(project: TestProject): Promise<() => void> {
  const postgres = await startPostgres();
  project.provide('postgresUrl', postgres.url);
  return () => postgres.stop();
}
