// Structured logs (pino). Clear identifiers, names and secrets must never reach a log line;
// the redaction list is a second line of defence behind code that never logs them.
import pino, { type Logger } from 'pino';

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
 * The access log: one line per request, so it is written asynchronously: a line is handed to
 * the kernel off the request's path, and lines that arrive while a write is in flight go in the
 * next one (under load, one write carries many lines; when quiet, each line goes at once). Lines
 * not yet written when the process is killed are lost, which an access log may afford; an
 * orderly stop flushes them.
 */
export function createAccessLogger(level: string): Logger {
  const destination = pino.destination({ dest: 1, sync: false });
  accessDestinations.push(destination);
  return createLogger(level, destination);
}

const accessDestinations: ReturnType<typeof pino.destination>[] = [];

/** Writes what the access log still holds; called before the process exits. */
export function flushAccessLogs(): void {
  for (const d of accessDestinations) d.flushSync();
}
