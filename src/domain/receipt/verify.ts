// Checking a receipt envelope against a key (SPEC J, `POST /receipts/verify`): an envelope that
// is not a receipt is answered invalid, `not_a_receipt`, whatever its signature; a receipt is
// answered with its signature's verdict under the key given. Pure: nothing is read or stored.
import { verifyObject, type VerifyFailure } from '../../protocol/signing.js';

export type ReceiptVerdict =
  { valid: true } | { valid: false; reason: VerifyFailure | 'not_a_receipt' };

/** The verdict on `envelope` as a receipt signed by the holder of `issuerPublicKey` (hex). */
export function verifyReceipt(
  envelope: Record<string, unknown>,
  issuerPublicKey: string,
): ReceiptVerdict {
  if (envelope.type !== 'path.receipt') return { valid: false, reason: 'not_a_receipt' };
  const verdict = verifyObject(envelope, issuerPublicKey);
  return verdict.valid ? { valid: true } : { valid: false, reason: verdict.reason };
}
