// A full garbage collection of a worker's heap (issue 33). V8 collects as a thread allocates, so a
// worker that has let go of many aggregates and then has nothing to do would keep the heap their
// states filled, and the memory under it, until its next burst of work: the shard asks for one
// collection then (Shard.passivate), and the heap gives its pages back.
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

/** The collection: `gc`, exposed to a context made after the flag is set. */
export function fullCollection(): () => void {
  setFlagsFromString('--expose-gc');
  return runInNewContext('gc') as () => void;
}
