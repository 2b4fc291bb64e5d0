// The registry of connectors (SPEC L): the shipped definitions, extended or replaced entry by
// entry from an operator's file of the same shape.
import { readFileSync } from 'node:fs';
import { Type } from '@sinclair/typebox';
import { validator } from '../protocol/schemas.js';
import { EXTERNAL_KEY_TYPES, type ExternalKeyType, type ParsedKey } from './keys.js';

const OPERATIONS = ['sonar', 'resolver', 'payee_check'] as const;

const ConnectorSchema = Type.Object({
  registry: Type.String({ minLength: 1, maxLength: 128 }),
  name: Type.Optional(Type.String({ maxLength: 256 })),
  rail: Type.String({ minLength: 1, maxLength: 64 }),
  zone: Type.String({ minLength: 2, maxLength: 16 }),
  operations: Type.Array(Type.Union(OPERATIONS.map((o) => Type.Literal(o))), { minItems: 1 }),
  key_types: Type.Array(Type.Union(EXTERNAL_KEY_TYPES.map((t) => Type.Literal(t))), {
    minItems: 1,
  }),
  status: Type.String({ minLength: 1, maxLength: 32 }),
});
const validateFile = validator(Type.Object({ connectors: Type.Array(ConnectorSchema) }));

export interface Connector {
  registry: string;
  name?: string;
  rail: string;
  zone: string;
  operations: string[];
  key_types: ExternalKeyType[];
  status: string;
}

function readConnectors(path: string | URL): Connector[] {
  const checked = validateFile(JSON.parse(readFileSync(path, 'utf8')));
  if (!checked.ok) throw new Error(`connectors file ${String(path)}: ${checked.refusal.message}`);
  return checked.value.connectors;
}

/** The shipped connectors, with the operator's file (if any) laid over them by registry name. */
export function loadConnectors(operatorFile?: string): Connector[] {
  const byRegistry = new Map<string, Connector>();
  const shipped = new URL('../../../src/external/connectors.json', import.meta.url);
  for (const c of readConnectors(shipped)) byRegistry.set(c.registry, c);
  if (operatorFile !== undefined)
    for (const c of readConnectors(operatorFile)) byRegistry.set(c.registry, c);
  return [...byRegistry.values()];
}

/** Connectors that could know a key of this type and zone. */
export function candidatesFor(
  connectors: readonly Connector[],
  type: ExternalKeyType,
  parsed: ParsedKey,
): Connector[] {
  return connectors.filter(
    (c) => c.key_types.includes(type) && (parsed.zones === null || parsed.zones.includes(c.zone)),
  );
}
