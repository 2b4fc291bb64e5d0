// Checking a receipt envelope against a key (SPEC J): a receipt signed by the key is valid; an
// envelope that is not a receipt, an altered receipt, or another key's, is not, with its reason.
import { describe, expect, it } from 'vitest';
import { envelopeFields, signingKeyFromSeed, signObject } from '../../protocol/signing.js';
import { verifyReceipt } from './verify.js';

const signer = signingKeyFromSeed(
  '9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60',
);
const other = signingKeyFromSeed(
  '4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb',
);

const signed = (fields: Record<string, unknown>) =>
  signObject({ ...fields, ...envelopeFields(signer, '2026-11-27T12:00:00Z') }, signer);

const receipt = () =>
  signed({
    type: 'path.receipt',
    reference: 'rcp_verify1',
    status: 'settled',
    received: { value: '10.00', asset_code: 'EUR' },
  });

describe('verifying a receipt envelope (SPEC J)', () => {
  it('is valid for a receipt and the key that signed it', () => {
    expect(verifyReceipt(receipt(), signer.publicKeyHex)).toEqual({ valid: true });
  });

  it('is not a receipt when the envelope is another signed object, however well signed', () => {
    const request = signed({ type: 'path.request', reference: 'req_verify1' });
    expect(verifyReceipt(request, signer.publicKeyHex)).toEqual({
      valid: false,
      reason: 'not_a_receipt',
    });
  });

  it("gives the signature's reason for an altered receipt, another key, or no signature", () => {
    const altered = { ...receipt(), status: 'failed' };
    expect(verifyReceipt(altered, signer.publicKeyHex).valid).toBe(false);
    expect(verifyReceipt(receipt(), other.publicKeyHex).valid).toBe(false);
    const { signature: _signature, ...unsigned } = receipt();
    expect(verifyReceipt(unsigned, signer.publicKeyHex)).toEqual({
      valid: false,
      reason: 'signature_missing',
    });
  });
});
