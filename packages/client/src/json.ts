// The one shape test the client and the pages make of what they read: a JSON object, which
// `typeof` alone does not tell apart from an array or null.
export type JsonObject = Record<string, unknown>;

export function isJsonObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
