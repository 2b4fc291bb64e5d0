// Figure 16: what a browser pays for @path-node/client, minified and gzipped, beside issue 31's
// 15 kB target (scripts/client-size.ts says how it is measured). A size, not a rate: one
// measurement, the same on every machine.
import { CLIENT_GZIP_BYTES_TARGET, clientSize } from '../scripts/client-size.js';
import type { Report } from './report.js';

export async function runClientSize(report: Report): Promise<void> {
  report.heading('16. @path-node/client, minified and gzipped');
  const { minifiedBytes, gzippedBytes } = await clientSize();
  report.line(`  minified ${minifiedBytes} bytes, gzipped ${gzippedBytes} bytes`);
  report.add({
    section: '16 client',
    figure: '@path-node/client min+gzip (kB)',
    value: (gzippedBytes / 1000).toFixed(1),
    target: {
      text: `<= ${CLIENT_GZIP_BYTES_TARGET / 1000} kB`,
      met: gzippedBytes <= CLIENT_GZIP_BYTES_TARGET,
    },
  });
}
