// Confirm (SPEC D) as a pure rule: every refusal reason, and the signed confirmation.
import { describe, expect, it } from 'vitest';
import { DEFAULT_LIMITS } from '../../config.js';
import {
  envelopeFields,
  signingKeyFromSeed,
  signObject,
  verifyObject,
} from '../../protocol/signing.js';
import { confirmAnswer, type ConfirmFacts } from './confirm.js';

const signer = signingKeyFromSeed(
  '9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60',
);
const NOW = Date.parse('2026-11-21T12:00:00Z');
const HASH = 'ab'.repeat(32);

const answer = (overrides: Record<string, unknown> = {}, at = NOW - 1_000) =>
  signObject(
    {
      kind: 'sonar_answer',
      identifier_type: 'email',
      identifier_hash: HASH,
      requester: 'beta',
      nonce: 'n-1',
      found: true,
      member: 'local',
      endpoint: 'http://127.0.0.1:8080',
      ...envelopeFields(signer, new Date(at).toISOString()),
      ...overrides,
    },
    signer,
  );

const facts = (overrides: Partial<ConfirmFacts> = {}): ConfirmFacts => ({
  now: NOW,
  member: 'local',
  limits: DEFAULT_LIMITS,
  signer,
  keyFor: (kid) => (kid === signer.kid ? signer.publicKeyHex : undefined),
  holds: () => true,
  ...overrides,
});

const reason = (result: ReturnType<typeof confirmAnswer>) =>
  (result as { detail: { reason: string } }).detail.reason;

describe('confirm (SPEC D)', () => {
  it('a fresh answer naming this node, found, is confirmed in a signed holder_confirmation', () => {
    const confirmed = confirmAnswer(answer(), facts()) as Record<string, unknown>;
    expect(confirmed).toMatchObject({
      kind: 'holder_confirmation',
      identifier_hash: HASH,
      member: 'local',
      requester: 'beta',
      nonce: 'n-1',
      held: true,
    });
    expect(verifyObject(confirmed, signer.publicKeyHex).valid).toBe(true);
    expect(
      (confirmAnswer(answer(), facts({ holds: () => false })) as Record<string, unknown>).held,
    ).toBe(false);
  });

  it('refuses: malformed, unknown key, invalid signature, stale, wrong holder', () => {
    expect(reason(confirmAnswer({ ...answer(), kind: 'other' }, facts()))).toBe('malformed');
    expect(reason(confirmAnswer(answer(), facts({ keyFor: () => undefined })))).toBe('unknown_key');
    expect(reason(confirmAnswer({ ...answer(), nonce: 'changed' }, facts()))).toBe(
      'invalid_signature',
    );
    expect(
      reason(confirmAnswer(answer({}, NOW - DEFAULT_LIMITS.lookup_confirm_freshness_ms), facts())),
    ).toBe('stale');
    expect(
      reason(confirmAnswer(answer({}, NOW + DEFAULT_LIMITS.timestamp_skew_ms + 1), facts())),
    ).toBe('stale');
    expect(reason(confirmAnswer(answer({ member: 'gamma' }), facts()))).toBe('wrong_holder');
    expect(reason(confirmAnswer(answer({ found: false }), facts()))).toBe('wrong_holder');
  });
});
