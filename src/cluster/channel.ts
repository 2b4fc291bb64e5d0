// The internal channel between the instances of one operator's cluster (P22): an instance that
// receives a command for a partition another instance holds sends it there, and answers its
// caller with what the owner answered. It is never a public route: it listens on its own port
// (loopback by default), and every call carries an HMAC of its time and body under a key every
// instance derives from the operator's sealing key, which only they share. Calls older than the
// skew are refused, so a recorded call cannot be played again later.
//
// Bodies are msgpack: a command and its answer cross as they are, buffers included.
import { createHmac, timingSafeEqual } from 'node:crypto';
import { Agent, createServer, request, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pack, unpack } from 'msgpackr';
import { MovedError } from '../actors/moved.js';
import {
  CHANNEL_BODY_BYTES_MAX,
  CHANNEL_SKEW_MS,
  DATABASE_RETRY_AFTER_SECONDS,
} from '../config.js';
import type { CommandResult, RoutedCommand } from '../actors/types.js';
import { refusal, type Refusal } from '../protocol/errors.js';
import { unreachable } from '../log/unavailable.js';

const PATH = '/internal/v1/command';
const MAC_HEADER = 'path-internal-mac';
const TIME_HEADER = 'path-internal-time';

/** The channel's key: derived from the sealing key, so it is never configured apart. */
export function channelKey(sealingKey: Buffer): Buffer {
  return createHmac('sha256', sealingKey).update('path-node internal channel v1').digest();
}

function mac(key: Buffer, time: string, body: Buffer): Buffer {
  return createHmac('sha256', key).update(time).update('\n').update(body).digest();
}

/**
 * What the owner answers: the command's result; that it no longer holds the partition; a refusal
 * it made before running the command (too many in flight), passed on to the caller as it is; or
 * an error.
 */
export type Answer =
  { result: CommandResult } | { moved: number } | { refused: Refusal } | { error: string };

/** A refusal (protocol/errors.ts): a plain object with a code and a message, not an Error. */
const isRefusal = (error: unknown): error is Refusal =>
  typeof error === 'object' &&
  error !== null &&
  !(error instanceof Error) &&
  typeof (error as Refusal).code === 'string' &&
  typeof (error as Refusal).message === 'string';

/**
 * An error of the owner's database being away: an UnavailableError, or one that crossed from a
 * worker thread as a copy that keeps its name but not its class.
 */
const unavailable = (error: unknown) =>
  unreachable(error) || (error instanceof Error && error.name === 'UnavailableError');

const UNAVAILABLE = refusal('path.core.unavailable', 'the database did not answer', {
  retry_after_seconds: DATABASE_RETRY_AFTER_SECONDS,
});

export class ChannelError extends Error {
  override name = 'ChannelError';
}

/** Takes the commands other instances send to this one. */
export class ChannelListener {
  private constructor(
    private readonly server: Server,
    readonly port: number,
  ) {}

  static async start(options: {
    host: string;
    port: number;
    key: Buffer;
    submit: (routed: RoutedCommand) => Promise<CommandResult>;
  }): Promise<ChannelListener> {
    const server = createServer((req, res) => {
      // A call whose body fails to arrive (its caller gone) has no one left to answer.
      answer(req, options).then(
        ([status, body]) => {
          res.writeHead(status, { 'content-type': 'application/msgpack' });
          res.end(body);
        },
        () => res.destroy(),
      );
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(options.port, options.host, () => resolve());
    });
    return new ChannelListener(server, (server.address() as AddressInfo).port);
  }

  close(): Promise<void> {
    return new Promise((resolve) => {
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
  }
}

async function answer(
  req: IncomingMessage,
  options: { key: Buffer; submit: (routed: RoutedCommand) => Promise<CommandResult> },
): Promise<[number, Buffer]> {
  const refuse = (status: number, error: string): [number, Buffer] => [status, pack({ error })];
  if (req.method !== 'POST' || req.url !== PATH) return refuse(404, 'no such internal route');
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > CHANNEL_BODY_BYTES_MAX) return refuse(413, 'body too large');
    chunks.push(chunk);
  }
  const body = Buffer.concat(chunks);
  const time = String(req.headers[TIME_HEADER] ?? '');
  const given = Buffer.from(String(req.headers[MAC_HEADER] ?? ''), 'hex');
  const expected = mac(options.key, time, body);
  const fresh = Math.abs(Date.now() - Number(time)) <= CHANNEL_SKEW_MS;
  if (!fresh || given.length !== expected.length || !timingSafeEqual(given, expected))
    return refuse(401, 'not a call of this cluster');
  let routed: RoutedCommand;
  try {
    routed = unpack(body) as RoutedCommand;
  } catch {
    return refuse(400, 'not a command');
  }
  const [status, answered] = await ownersAnswer(routed, options.submit);
  return [status, pack(answered)];
}

/** What the owner answers a command sent to it, and with which status. */
export async function ownersAnswer(
  routed: RoutedCommand,
  submit: (routed: RoutedCommand) => Promise<CommandResult>,
): Promise<[number, Answer]> {
  try {
    return [200, { result: await submit(routed) }];
  } catch (error) {
    if (error instanceof MovedError) return [409, { moved: error.partition }];
    if (isRefusal(error)) return [503, { refused: error }];
    // The owner's database did not answer (issue 29): the caller answers 503, as the owner would.
    if (unavailable(error)) return [503, { refused: UNAVAILABLE }];
    return [500, { error: error instanceof Error ? error.message : String(error) }];
  }
}

/** The owner's answer as its caller takes it: the result, or what it throws. */
export function callersResult(answered: Answer): CommandResult {
  if ('result' in answered) return answered.result;
  if ('moved' in answered) throw new MovedError(answered.moved);
  if ('refused' in answered) throw answered.refused;
  throw new ChannelError(answered.error);
}

/** What the router sends commands with (ChannelClient; the simulator's channel in a run). */
export interface Channel {
  /** The owner's answer; MovedError when it no longer holds the partition. */
  send(address: string, routed: RoutedCommand, timeoutMs: number): Promise<CommandResult>;
}

/** Sends commands to other instances, over kept-alive connections. */
export class ChannelClient implements Channel {
  private readonly agent = new Agent({ keepAlive: true });

  constructor(private readonly key: Buffer) {}

  /** The owner's answer; MovedError when it no longer holds the partition. */
  send(address: string, routed: RoutedCommand, timeoutMs: number): Promise<CommandResult> {
    const body = pack(routed);
    const time = String(Date.now());
    const url = new URL(PATH, address);
    return new Promise((resolve, reject) => {
      const req = request(
        url,
        {
          method: 'POST',
          agent: this.agent,
          timeout: timeoutMs,
          headers: {
            'content-type': 'application/msgpack',
            'content-length': body.length,
            [TIME_HEADER]: time,
            [MAC_HEADER]: mac(this.key, time, body).toString('hex'),
          },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (chunk: Buffer) => chunks.push(chunk));
          res.on('error', reject);
          res.on('end', () => {
            let answered: Answer;
            try {
              answered = unpack(Buffer.concat(chunks)) as Answer;
            } catch {
              return reject(new ChannelError(`unreadable answer (${res.statusCode})`));
            }
            try {
              resolve(callersResult(answered));
            } catch (error) {
              reject(error);
            }
          });
        },
      );
      req.on('timeout', () => req.destroy(new ChannelError('the owner did not answer in time')));
      req.on('error', (error) =>
        reject(error instanceof ChannelError ? error : new ChannelError(error.message)),
      );
      req.end(body);
    });
  }

  close(): void {
    this.agent.destroy();
  }
}
