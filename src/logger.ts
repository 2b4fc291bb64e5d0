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
