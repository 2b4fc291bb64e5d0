// The closed set of refusal codes and the one table that maps each to its HTTP status
// (SPEC Errors, P7). Business refusals travel as values (`Refusal`); only this table decides
// what they look like on the wire.

export const ERROR_STATUS = {
  'path.core.invalid_request': 400,
  'path.core.payload_too_large': 413,
  'path.core.unsupported_media_type': 415,
  'path.core.version_unknown': 400,
  'path.core.not_found': 404,
  'path.core.method_not_allowed': 405,
  // A method no route of any node knows (RFC 9110 15.6.2); the two after it are answered by
  // uWebSockets.js's parser itself, before any route (vendor/uws/install.js writes them).
  'path.core.method_not_implemented': 501,
  'path.core.http_version_not_supported': 505,
  'path.core.header_fields_too_large': 431,
  'path.core.idempotency_conflict': 422,
  'path.core.idempotency_in_progress': 409,
  'path.core.unavailable': 503,
  'path.core.internal': 500,
  'path.auth.unauthenticated': 401,
  'path.auth.forbidden': 403,
  'path.auth.context_refused': 403,
  'path.request.expired': 410,
  'path.request.revoked': 410,
  'path.request.not_open': 409,
  'path.instruction.used': 410,
  'path.instruction.expired': 410,
  'path.instruction.revoked': 410,
  'path.address.revoked': 410,
  'path.address.capability_not_accepted': 422,
  'path.id.attestation_revoked': 410,
  'path.id.attestation_expired': 410,
  'path.finder.budget_exhausted': 429,
  'path.sonar.confirmation_refused': 403,
  'path.settlement.transition_invalid': 409,
  'path.checkout.session_not_open': 409,
  'path.connect.delegation_out_of_scope': 403,
  'path.connect.delegation_limit_reached': 403,
  'path.connect.revoked': 410,
  'path.connect.expired': 410,
  'external.key.invalid': 400,
  'external.auth.unauthenticated': 401,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

export interface Refusal {
  code: ErrorCode;
  message: string;
  detail?: Record<string, unknown>;
}

export function refusal(
  code: ErrorCode,
  message: string,
  detail?: Record<string, unknown>,
): Refusal {
  return detail === undefined ? { code, message } : { code, message, detail };
}

export function statusOf(code: ErrorCode): number {
  return ERROR_STATUS[code];
}

/** The SPEC error envelope: `{ "error": { "code", "message", "detail"? } }`. */
export function errorBody(r: Refusal): string {
  return JSON.stringify({ error: r });
}

/**
 * The refusal a read answers once an object's deadline has passed (a view's expiry, exact to the
 * millisecond before any tick records it).
 */
export function expiredRefusal(code: ErrorCode): Refusal {
  const what = code.startsWith('path.request.')
    ? 'request'
    : code.startsWith('path.instruction.')
      ? 'instruction'
      : 'object';
  return refusal(code, `this ${what} has expired`);
}

export function invalid(field: string, message: string): Refusal {
  return refusal('path.core.invalid_request', message, { field });
}

export function isRefusal(value: unknown): value is Refusal {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as Refusal).code === 'string' &&
    (value as Refusal).code in ERROR_STATUS &&
    typeof (value as Refusal).message === 'string'
  );
}
