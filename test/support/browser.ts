// Test support: headless Chromium from Debian's package, driven by playwright-core. One browser
// per test file; each test opens its own context so cookies and caches never cross tests.
import { chromium, type Browser } from 'playwright-core';

export const CHROMIUM = '/usr/bin/chromium';

export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking'],
  });
}
