// Calls from this node to another member node: requests signed with this node's own signing key
// (P5: a member node's signing key is that member's credential), with a timeout.
import type { SigningKey } from '../protocol/signing.js';
import { signedHeaders } from '../http/auth.js';

export async function peerRequest(
  url: string,
  options: { method: 'GET' | 'POST'; body?: string; signer?: SigningKey; timeoutMs: number },
): Promise<{ status: number; text: string }> {
  const target = new URL(url);
  const body = options.body ?? '';
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (options.signer !== undefined) {
    Object.assign(
      headers,
      signedHeaders({
        keyId: options.signer.kid,
        key: options.signer,
        method: options.method,
        target: target.pathname + target.search,
        body,
      }),
    );
  }
  const res = await fetch(url, {
    method: options.method,
    headers,
    body: options.method === 'POST' ? body : undefined,
    redirect: 'manual',
    signal: AbortSignal.timeout(options.timeoutMs),
  });
  return { status: res.status, text: await res.text() };
}
