// The growing children of an aggregate (a subject's identifiers and addresses, a connection's
// delegations) as persistent ordered maps. A pure `evolve` adds or changes one child without
// copying the others, so a command costs the same at 10 children or 100,000 (issue 15), and
// children keep the order they were added in, as answers list them. Framed (src/log/record.ts),
// such a map is its plain entries in order.
import { OrderedMap } from 'immutable';

export type Children<T> = OrderedMap<string, T>;

export const noChildren = <T>(): Children<T> => OrderedMap<string, T>();

/**
 * The children as the persistent map. A state, event or snapshot stored before they were one
 * holds them as a plain object in the same order, taken over here.
 */
export function childrenOf<T>(held: Children<T> | Record<string, T>): Children<T> {
  return OrderedMap.isOrderedMap(held)
    ? (held as Children<T>)
    : OrderedMap(held as Record<string, T>);
}
