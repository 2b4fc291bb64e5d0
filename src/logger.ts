// Structured logs (pino). Clear identifiers, names and secrets must never reach a log line;
// the redaction list is a second line of defence behind code that never logs them.
import pino, { type Logger } from 'pino';
import { LOGGED_STACK_FRAMES_MAX } from './config.js';

export const REDACTED_PATHS = [
  'identifier',
  '*.identifier',
  'registered_name',
  '*.registered_name',
  'name',
  '*.name',
  'account_ref',
  '*.account_ref',
  'target',
  '*.target',
  'key',
  '*.key',
  'external_ref',
  '*.external_ref',
  'seed_hex',
  '*.seed_hex',
  'pepper',
  '*.pepper',
  'private_key',
  '*.private_key',
  'body',
  '*.body',
  'headers["path-signature"]',
  '*.headers["path-signature"]',
];

export function createLogger(level: string, destination?: pino.DestinationStream): Logger {
  return pino(
    {
      level,
      base: { service: 'path-node' },
      redact: { paths: REDACTED_PATHS, censor: '[redacted]' },
    },
    destination,
  );
}

/**
 * What a log line says of an exception: its class, its code and where it was thrown; never its
 * message, which may quote what a request carried (a parser's message quotes its input).
 */
export function exceptionFields(error: unknown): { kind: string; code?: string; at: string[] } {
  if (!(error instanceof Error)) return { kind: typeof error, at: [] };
  const at = (error.stack ?? '')
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line.startsWith('at '))
    .slice(0, LOGGED_STACK_FRAMES_MAX);
  const code = (error as NodeJS.ErrnoException).code;
  return { kind: error.constructor.name, ...(typeof code === 'string' ? { code } : {}), at };
}
