// PathError: what the client throws (P18). Codes from the node's error envelope come through
// unchanged; the client's own codes are listed in index.ts.

export class PathError extends Error {
  override readonly name = 'PathError';
  /** The HTTP status of the answer concerned; 0 when the failure involved no answer. */
  readonly status: number;
  readonly code: string;
  readonly detail: Record<string, unknown> | undefined;

  constructor(init: {
    status: number;
    code: string;
    message: string;
    detail?: Record<string, unknown>;
  }) {
    super(init.message);
    this.status = init.status;
    this.code = init.code;
    this.detail = init.detail;
  }
}

/** Client-side codes (module header of index.ts says when each is thrown). */
export const CLIENT_CODES = {
  signatureInvalid: 'path.client.signature_invalid',
  operationUnknown: 'path.client.operation_unknown',
  paramMissing: 'path.client.param_missing',
  responseMalformed: 'path.client.response_malformed',
  webhookInvalid: 'path.client.webhook_invalid',
  commitmentMismatch: 'path.address.commitment_mismatch',
} as const;
