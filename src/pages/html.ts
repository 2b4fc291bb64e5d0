// HTML built from tagged templates that escape every value they are given (P20): only markup
// this code writes itself, or a fragment made by `html` again, goes into a page unescaped, so a
// value from a signed object (an `order_reference`, a URL) can only ever show as text.
import escapeHtml from 'escape-html';

/** Markup already safe to put in a page: written here, or escaped on its way in. */
export class Html {
  constructor(readonly text: string) {}
  toString(): string {
    return this.text;
  }
}

type Value = Html | string | number | null | undefined | readonly Value[];

function part(value: Value): string {
  if (value instanceof Html) return value.text;
  if (value === null || value === undefined) return '';
  if (Array.isArray(value)) return value.map(part).join('');
  return escapeHtml(String(value));
}

/** `html\`<p>${value}</p>\``: each value escaped, fragments and lists of fragments kept. */
export function html(strings: TemplateStringsArray, ...values: Value[]): Html {
  let out = strings[0]!;
  values.forEach((value, i) => {
    out += part(value) + strings[i + 1]!;
  });
  return new Html(out);
}

/**
 * Markup produced by code this node trusts (the QR code's SVG, made from the link alone, with
 * no value of the object in it), taken as it is.
 */
export function trusted(markup: string): Html {
  return new Html(markup);
}
