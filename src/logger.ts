// Structured logs (pino). Clear identifiers, names and secrets must never reach a log line;
// the redaction list is a second line of defence behind code that never logs them.
import pino, { type Logger } from 'pino';
import { ACCESS_LOG_BUFFER_BYTES } from './config.js';

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
 * The access log: one line per request, so its writes are buffered (a write call per request
 * would cost the node a system call on every answer). Lines still buffered when the process is
 * killed are lost, which an access log may afford; an orderly stop flushes them.
 */
export function createAccessLogger(level: string): Logger {
  const destination = pino.destination({
    dest: 1,
    sync: false,
    minLength: ACCESS_LOG_BUFFER_BYTES,
  });
  accessDestinations.push(destination);
  return createLogger(level, destination);
}

const accessDestinations: ReturnType<typeof pino.destination>[] = [];

/** Writes what the access log still holds; called before the process exits. */
export function flushAccessLogs(): void {
  for (const d of accessDestinations) d.flushSync();
}
