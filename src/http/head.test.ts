// The standard head of an answer (head.ts) as it goes on the wire: for every combination of a
// pinned version, a signed body and a public path, and for a 204, each P7/P10/P20 line once,
// with its value, and nothing else.
import type uws from 'uWebSockets.js';
import { describe, expect, it } from 'vitest';
import { API_VERSION } from '../config.js';
import { PROTOCOL_VERSION } from '../protocol/signing.js';
import { writeStandardHead } from './head.js';

/** The header lines a response was given, as uWebSockets.js writes them: `name: value\r\n`. */
function wire(type: string | null, head: Parameters<typeof writeStandardHead>[2]): string[] {
  let text = '';
  const res = {
    writeHeader(name: string | Buffer, value: string | Buffer) {
      text += `${name.toString()}: ${value.toString()}\r\n`;
      return res;
    },
  };
  writeStandardHead(res as unknown as uws.HttpResponse, type, head);
  expect(text.endsWith('\r\n')).toBe(true);
  return text.slice(0, -2).split('\r\n');
}

describe('writeStandardHead', () => {
  it('writes each line of the answer once, for every kind of answer', () => {
    for (const type of ['application/json', 'text/html; charset=utf-8', null]) {
      for (const pinned of [false, true]) {
        for (const signed of [false, true]) {
          for (const cors of [false, true]) {
            const requestId = `abc-${Number(pinned)}${Number(signed)}${Number(cors)}`;
            const lines = wire(type, { pinned, requestId, signed, cors });
            const expected = [
              ...(type === null ? [] : [`content-type: ${type}`]),
              `path-version: ${API_VERSION}`,
              `path-version-pinned: ${pinned}`,
              ...(signed ? [`path-protocol-version: ${PROTOCOL_VERSION}`] : []),
              ...(cors ? ['access-control-allow-origin: *'] : []),
              `path-request-id: ${requestId}`,
            ];
            const named = lines.filter((line) => !line.startsWith('access-control-expose-headers'));
            expect(named.sort()).toEqual(expected.sort());
            const exposed = lines.filter((l) => l.startsWith('access-control-expose-headers: '));
            expect(exposed).toHaveLength(cors ? 1 : 0);
            if (cors) expect(exposed[0]).toContain('path-request-id');
          }
        }
      }
    }
  });
});
