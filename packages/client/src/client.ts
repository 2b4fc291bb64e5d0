// PathClient (P18): discovery, keys, calls by operation name, and address resolution, with every
// signed statement verified against the operator's published keys before it is returned.
import { fromLowerHex } from './bytes.js';
import { digestOf } from './canonical.js';
import { CLIENT_CODES, PathError } from './errors.js';
import { exchange, expandUrl, readAnswer, type Signer } from './http.js';
import { signedSites, type SignedSite } from './signed.js';
import type {
  CallOptions,
  CallResult,
  CommitmentObject,
  ConfigurationDocument,
  Endpoint,
  FetchLike,
  KeysDocument,
  PathClientOptions,
  Resolution,
  ResolverAnswer,
  VerifyFailure,
} from './types.js';
import { verifySigned } from './verify.js';
import { isJsonObject, type JsonObject } from './json.js';

/** The fixed routes (P4): at the root of the node, whatever prefix its operations use. */
const CONFIGURATION_PATH = '/.well-known/path-configuration';
const KEYS_PATH = '/.well-known/path-keys';

function signatureError(
  status: number,
  at: string,
  reason: VerifyFailure,
  kid: unknown,
): PathError {
  return new PathError({
    status,
    code: CLIENT_CODES.signatureInvalid,
    message: `the signed object at ${at} does not verify with the operator's keys (${reason})`,
    detail: { at, reason, kid: typeof kid === 'string' ? kid : null },
  });
}

function mismatch(
  where: { address: string; status: number },
  reason: string,
  detail: JsonObject = {},
): PathError {
  const { address, status } = where;
  return new PathError({
    status,
    code: CLIENT_CODES.commitmentMismatch,
    message: `the resolver answer for ${address} diverges from the commitment (${reason})`,
    detail: { address, reason, ...detail },
  });
}

export class PathClient {
  readonly baseUrl: string;
  private readonly signer: Signer | null;
  private readonly fetcher: FetchLike;
  private configuration: ConfigurationDocument | null = null;
  private keysDocument: KeysDocument | null = null;

  constructor(options: PathClientOptions) {
    const base = new URL(options.baseUrl);
    if (base.protocol !== 'https:' && base.protocol !== 'http:')
      throw new TypeError('baseUrl must be an http or https URL');
    this.baseUrl = base.href.replace(/\/+$/, '');
    this.fetcher = options.fetch ?? ((input, init) => globalThis.fetch(input, init));
    this.signer = null;
    if (options.credential !== undefined) {
      const { keyId, privateKeyHex } = options.credential;
      const seed = fromLowerHex(String(privateKeyHex).toLowerCase(), 32);
      if (typeof keyId !== 'string' || keyId === '' || seed === null)
        throw new TypeError('credential needs a keyId and a 32-byte privateKeyHex');
      this.signer = { keyId, seed };
    }
  }

  /** The configuration document (P4); kept for the calls that follow. */
  async discover(): Promise<ConfigurationDocument> {
    const answer = await this.get(CONFIGURATION_PATH);
    this.configuration = answer.body as ConfigurationDocument;
    return this.configuration;
  }

  /** The keys document (P4), retired keys included; kept to verify what the node signs. */
  async keys(): Promise<KeysDocument> {
    const answer = await this.get(KEYS_PATH);
    this.keysDocument = answer.body as KeysDocument;
    return this.keysDocument;
  }

  /**
   * Calls an operation by its name in the discovery document, and verifies the signed objects
   * of its answer (signed.ts says which). Throws PathError on an error envelope or a
   * signature that does not verify.
   */
  async call<T = any>(operation: string, options: CallOptions = {}): Promise<CallResult<T>> {
    const answer = await this.send(operation, options);
    const { sites, unsigned } = signedSites(operation, answer.body);
    if (unsigned.length > 0)
      throw signatureError(answer.status, unsigned[0]!, 'signature_missing', null);
    await this.verifySites(answer.status, sites);
    return answer;
  }

  /**
   * The resolver answer and the commitment object of an address (SPEC E), both verified, and
   * the commitment recomputed over `{grammar, address, accepts, limits}` (P3) and compared with
   * both. Any divergence throws PathError `path.address.commitment_mismatch`. An answer with
   * `commitment: null` (no standing intent: accepts inferred, not pledged) is returned as is,
   * provided the node publishes no commitment for the address either.
   *
   * The terms are compared before the signatures are checked: an answer whose terms diverge
   * from the pledge is the potentially compromised resolver SPEC E names, refused as such (and
   * not retried) whether or not its signature would verify.
   */
  async resolve(address: string): Promise<Resolution> {
    const params = { key: address };
    const [answered, committed] = await Promise.allSettled([
      this.send('resolver.get', { params }),
      this.send('commitments.get', { params }),
    ]);
    if (answered.status === 'rejected') throw answered.reason;
    let commitment: CommitmentObject | null = null;
    if (committed.status === 'fulfilled') commitment = committed.value.body as CommitmentObject;
    else if (!(committed.reason instanceof PathError && committed.reason.status === 404))
      throw committed.reason;
    const answer = answered.value.body as ResolverAnswer;
    if (!isJsonObject(answer))
      throw signatureError(answered.value.status, 'body', 'not_an_object', null);
    checkCommitment({ address, status: answered.value.status }, answer, commitment);
    const sites: SignedSite[] = [{ at: 'resolver answer', object: answer }];
    if (commitment !== null) sites.push({ at: 'commitment object', object: commitment });
    await this.verifySites(answered.value.status, sites);
    return { answer, commitment };
  }

  private async get(path: string): Promise<CallResult> {
    const response = await this.fetcher(this.baseUrl + path, {
      method: 'GET',
      headers: { accept: 'application/json' },
    });
    return readAnswer(response);
  }

  private async send(operation: string, options: CallOptions): Promise<CallResult> {
    const endpoint = await this.endpoint(operation);
    const url = expandUrl(operation, endpoint, options.params, options.query);
    return exchange(this.fetcher, {
      method: endpoint.method.toUpperCase(),
      url,
      body: options.body,
      idempotencyKey: options.idempotencyKey,
      signer: this.signer,
    });
  }

  /** The operation's method and URL from discovery (asked again once when it is not there). */
  private async endpoint(operation: string): Promise<Endpoint> {
    const find = (configuration: ConfigurationDocument | null) => {
      const endpoints = configuration?.endpoints;
      return isJsonObject(endpoints) && Object.hasOwn(endpoints, operation)
        ? endpoints[operation]
        : undefined;
    };
    let endpoint = find(this.configuration);
    if (endpoint === undefined) endpoint = find(await this.discover());
    if (
      !isJsonObject(endpoint) ||
      typeof endpoint.url !== 'string' ||
      typeof endpoint.method !== 'string'
    ) {
      throw new PathError({
        status: 0,
        code: CLIENT_CODES.operationUnknown,
        message: `the node's discovery document names no operation "${operation}"`,
        detail: { operation },
      });
    }
    return endpoint;
  }

  /**
   * Each object verified with the keys document by its `kid`; an unknown `kid` fetches the
   * document again, once per answer (a key rotated since it was read).
   */
  private async verifySites(status: number, sites: readonly SignedSite[]): Promise<void> {
    if (sites.length === 0) return;
    let refreshed = this.keysDocument === null;
    let keys = this.keysDocument ?? (await this.keys());
    for (const site of sites) {
      let verdict = verifySigned(site.object, keys);
      if (!verdict.valid && verdict.reason === 'kid_unknown' && !refreshed) {
        refreshed = true;
        keys = await this.keys();
        verdict = verifySigned(site.object, keys);
      }
      if (!verdict.valid) throw signatureError(status, site.at, verdict.reason, site.object.kid);
    }
  }
}

/** SPEC E and P3: the terms, the answer's pledge and the commitment object agree. */
function checkCommitment(
  where: { address: string; status: number },
  answer: ResolverAnswer,
  commitment: CommitmentObject | null,
): void {
  const { address } = where;
  if (answer.address !== address) throw mismatch(where, 'answer_for_another_address');
  if (commitment !== null && (!isJsonObject(commitment) || commitment.address !== address))
    throw mismatch(where, 'commitment_for_another_address');
  if (answer.commitment === null || answer.commitment === undefined) {
    if (commitment !== null) throw mismatch(where, 'answer_drops_the_commitment');
    return;
  }
  const { grammar, accepts, limits } = answer;
  const recomputed = digestOf({ grammar, address: answer.address, accepts, limits });
  if (recomputed !== answer.commitment)
    throw mismatch(where, 'terms_differ', { recomputed, answer: answer.commitment });
  if (commitment === null) throw mismatch(where, 'commitment_missing');
  if (commitment.commitment !== answer.commitment)
    throw mismatch(where, 'pledges_differ', {
      answer: answer.commitment,
      commitment: commitment.commitment,
    });
}
