// The P5 signing string, one definition for the client that signs and the node that verifies: a
// pure function with no imports, so the browser-safe client and the node share it.

/** P5: the signing string, lines joined by `\n`, no trailing newline. */
export function signingString(r: {
  method: string;
  target: string;
  timestamp: string;
  idempotencyKey: string | undefined;
  bodySha256Hex: string;
}): string {
  return [
    'path-request-v1',
    r.method.toUpperCase(),
    r.target,
    r.timestamp,
    r.idempotencyKey ?? '',
    r.bodySha256Hex,
  ].join('\n');
}
