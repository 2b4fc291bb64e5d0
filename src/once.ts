// A value made when first asked for, then kept: what a start need not pay for before anyone uses
// it (a schema's compiled check, a document's compressed coding, a table read from constants).

/** `make`'s value, made on the first call and kept. */
export function once<T>(make: () => T): () => T {
  let made: { value: T } | null = null;
  return () => (made ??= { value: make() }).value;
}
